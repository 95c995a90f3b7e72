"""pg_llm benchmark harness (driven by bench/run).

Modules:
  common     measurement helpers: subprocess runs, medians, alternating rounds, table
  gguf_info  weight bytes and parameter count of a GGUF file (for the rooflines)
  ours       pg_llm's engine through build/llm-cli
  llamacpp   the llama.cpp peer: llama-bench and a llama-server with HTTP clients
  workloads  the comparisons bench/run knows about (a registry; W1/W3/W4 slot in here)
"""
