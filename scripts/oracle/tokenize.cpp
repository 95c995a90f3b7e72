/*
 * tokenize.cpp — llama.cpp's tokenization of many strings with one model
 * load, for the tokenizer and chat-template goldens.
 *
 * llama.cpp (the version vendored in llama-cpp-python 0.3.36) through its
 * public C API (include/llama.h), vocabulary only.  Reads lines from stdin,
 * writes one line of space-separated ids per input line to stdout:
 *
 *   tokenize MODEL.gguf plain
 *       each line is the hex of a UTF-8 string; ids of
 *       llama_tokenize(add_special = false, parse_special = false), which is
 *       what `llama-tokenize --no-bos --no-parse-special` prints
 *   tokenize MODEL.gguf chat TEMPLATE
 *       each line is "role:hex role:hex ..."; the messages are rendered with
 *       llama_chat_apply_template(TEMPLATE, add_ass = true) (a built-in
 *       template name such as "gemma") and tokenized with add_special = true
 *       (BOS when the model adds one) and parse_special = true
 */
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

static std::string
unhex(const std::string &h)
{
	std::string out;

	if (h.size() % 2)
	{
		fprintf(stderr, "tokenize: odd hex length\n");
		exit(1);
	}
	for (size_t i = 0; i < h.size(); i += 2)
		out += (char) strtol(h.substr(i, 2).c_str(), nullptr, 16);
	return out;
}

static std::vector<llama_token>
tokenize(const llama_vocab *vocab, const std::string &text, bool add_special, bool parse_special)
{
	std::vector<llama_token> toks(text.size() + 16);
	int32_t		n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), toks.data(),
								   (int32_t) toks.size(), add_special, parse_special);

	if (n < 0)
	{
		toks.resize(-n);
		n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), toks.data(),
						   (int32_t) toks.size(), add_special, parse_special);
	}
	if (n < 0)
	{
		fprintf(stderr, "tokenize: llama_tokenize failed\n");
		exit(1);
	}
	toks.resize(n);
	return toks;
}

static void
print_ids(const std::vector<llama_token> &ids)
{
	for (size_t i = 0; i < ids.size(); i++)
		printf("%s%d", i ? " " : "", ids[i]);
	printf("\n");
}

static void
quiet_log(ggml_log_level level, const char *text, void *)
{
	if (level == GGML_LOG_LEVEL_ERROR)
		fputs(text, stderr);
}

int
main(int argc, char **argv)
{
	if (argc < 3 || (strcmp(argv[2], "plain") != 0 && strcmp(argv[2], "chat") != 0) ||
		(strcmp(argv[2], "chat") == 0 && argc != 4))
	{
		fprintf(stderr, "usage: tokenize MODEL.gguf plain | chat TEMPLATE  < lines\n");
		return 2;
	}
	const bool	chat = strcmp(argv[2], "chat") == 0;

	llama_log_set(quiet_log, nullptr);
	llama_backend_init();

	llama_model_params mp = llama_model_default_params();

	mp.vocab_only = true;
	llama_model *model = llama_model_load_from_file(argv[1], mp);

	if (!model)
	{
		fprintf(stderr, "tokenize: cannot load %s\n", argv[1]);
		return 1;
	}
	const llama_vocab *vocab = llama_model_get_vocab(model);
	std::string line;

	while (std::getline(std::cin, line))
	{
		if (!chat)
		{
			print_ids(tokenize(vocab, unhex(line), false, false));
			continue;
		}
		std::vector<std::string> roles, contents;
		size_t		start = 0;

		while (start < line.size())
		{
			size_t		sp = line.find(' ', start);
			std::string item = line.substr(start, sp == std::string::npos ? std::string::npos : sp - start);
			size_t		colon = item.find(':');

			if (colon == std::string::npos)
			{
				fprintf(stderr, "tokenize: bad chat item %s\n", item.c_str());
				return 1;
			}
			roles.push_back(item.substr(0, colon));
			contents.push_back(unhex(item.substr(colon + 1)));
			if (sp == std::string::npos)
				break;
			start = sp + 1;
		}
		std::vector<llama_chat_message> msgs;

		for (size_t i = 0; i < roles.size(); i++)
			msgs.push_back({roles[i].c_str(), contents[i].c_str()});

		std::vector<char> buf(4096);
		int32_t		n = llama_chat_apply_template(argv[3], msgs.data(), msgs.size(), true,
												  buf.data(), (int32_t) buf.size());

		if (n > (int32_t) buf.size())
		{
			buf.resize(n);
			n = llama_chat_apply_template(argv[3], msgs.data(), msgs.size(), true, buf.data(), n);
		}
		if (n < 0)
		{
			fprintf(stderr, "tokenize: llama_chat_apply_template(%s) failed\n", argv[3]);
			return 1;
		}
		print_ids(tokenize(vocab, std::string(buf.data(), n), true, true));
	}
	llama_model_free(model);
	llama_backend_free();
	return 0;
}
