--
-- chat: OpenAI-style messages through the model's chat template.
--
SELECT llm_chat('[{"role": "user", "content": "What is the capital of Australia?"}]', max_tokens => 24);
-- one user message is what llm_generate sends
SELECT llm_chat('[{"role": "user", "content": "Say hi."}]', max_tokens => 12)
     = llm_generate('Say hi.', max_tokens => 12) AS chat_equals_generate;
-- multi-turn with an assistant message
SELECT llm_chat('[{"role": "system", "content": "You answer with one word."},
                  {"role": "user", "content": "Name a planet."},
                  {"role": "assistant", "content": "Mars"},
                  {"role": "user", "content": "Another one?"}]', max_tokens => 8);
-- the system argument is a leading system message
SELECT llm_chat('[{"role": "user", "content": "Hi"}]', system => 'Be brief.', max_tokens => 10)
     = llm_chat('[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]', max_tokens => 10) AS system_arg;
SELECT llm_generate('Hi', system => 'Be brief.', max_tokens => 10)
     = llm_chat('[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]', max_tokens => 10) AS generate_system;
-- extra members are ignored
SELECT llm_chat('[{"role": "user", "content": "Say hi.", "name": "bob"}]', max_tokens => 12)
     = llm_generate('Say hi.', max_tokens => 12) AS extra_members_ignored;
