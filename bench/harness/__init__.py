"""pg_llm benchmark harness (driven by bench/run).

Modules:
  common     measurement helpers: subprocess runs, medians, alternating rounds, table
  gguf_info  weight bytes and parameter count of a GGUF file (for the rooflines)
  ours       pg_llm's engine through build/llm-cli
  pg         a throwaway PostgreSQL with pg_llm, pgbench, plpython3u for the pgai-style peer
  llamacpp   the llama.cpp peer: llama-bench and a llama-server with HTTP clients
  workloads  the comparisons bench/run knows about (engine: single, batchB; PostgreSQL: W1, W3, W4)
  jobs       durable jobs (llm_enrich) vs the one-statement UPDATE, resume after a killed runner,
             continuous-mode latency
  selftest   checks of the harness arithmetic (percentiles, decode rates, the W1 bound), no model needed
"""
