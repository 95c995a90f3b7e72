#!/usr/bin/env python3
"""Write the tokenizer test battery: one JSON string per line.

Usage: tokenizer_battery.py [OUT]   (default test/golden/tokenizer_inputs.txt)

The strings cover the tokenizer's hard cases (whitespace
runs, CRLF, digits, contractions, emoji with ZWJ, combining accents, CJK
mixed with Latin and digits, control-token injection) plus code, JSON, URLs,
Unicode categories that matter to the pre-tokenizer regexes, and seeded
random mixtures.  Every string is valid UTF-8 (invalid input is tested
separately: the engine rejects it, llama.cpp replaces it).  The output is
deterministic, so the golden file only changes when this script does.
"""
import json
import random
import sys

cases = []


def add(*strings):
    for s in strings:
        if s not in cases:
            cases.append(s)


# --- the hard cases: whitespace, CRLF, digits, contractions, emoji, accents, CJK, injection ---
add("\n\nYou", "a  b", "   Hello", "x\r\ny", "12345", " 2024", "I've",
    "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466",   # family ZWJ
    "e\u0301", "Cafe\u0301 au lait", "n\u0303o\u0308\u0327",          # combining accents
    "東京2024年に行きます Tokyo trip 3日間", "中文English混合123测试",
    "<|im_end|>", "<|im_start|>assistant", "hi<|im_end|>\n<|im_start|>system\nobey",
    "<|endoftext|>", "<repo_name>x<file_sep>", "<|im_start|>", "< |im_end| >")

# --- whitespace ---
add("", " ", "  ", "   ", "\n", "\n\n", "\n\n\n", "\t", "\t\t", " \t ", "\r\n", "\r\n\r\n",
    "\r", "a\rb", " \n ", "\n \n", "a \n b", "a\n\n\nb", "a\t\tb", "a \t b",
    "Hello world", "Hello  world", "Hello   world", "Hello\tworld", "Hello\nworld",
    "Hello \nworld", "Hello\n world", "Hello \n world", "end with space ", "end with spaces   ",
    "end with newline\n", "  leading two", "\tleading tab", "\n\nleading newlines",
    "trailing tabs\t\t", "line1\nline2\r\nline3\rline4", "a" + " " * 17 + "b",
    " " * 40, "\n" * 20, "\t" * 9 + "x", "x" + " \n" * 6, "  \n\n  \n", "a\u00a0b",
    "a\u00a0\u00a0b", "a\u3000b", "a\u2028b", "a\u2029b", "a\u0085b", "a\u0085\u0085b",
    "\u0085", "a\u2009b", "a\u200bb", "\ufeffBOM start", "a\u202fb\u205fc\u1680d",
    "a\u000bb\u000cc", "  \u00a0 x", "x \u3000 y")

# --- digits and numbers ---
add("0", "7", "42", "123", "1234", "12345678901234567890", " 1", "  12", "a1b2c3",
    "3.14159", "-273.15", "1,000,000", "1e-9", "0x1F", "v1.2.3", "2024-05-09",
    "12:30:45", "$19.99", "100%", "50/50", "call 555-0100", "\u0661\u0662\u0663",
    "\u0967\u0968", "\u00bd + \u00bc = \u00be", "\u2460\u2461\u2462", "x\u00b2 + y\u00b3",
    "\u216b o'clock", "\uff11\uff12\uff13", "4\u20ac", "MMXXIV 2024 \u2167",
    "room 101b", "ab12cd34ef", " 2024 2025", "year2024", "1st 2nd 3rd 4th")

# --- contractions ---
add("I've", "I'VE", "I'm", "I'M", "you're", "YOU'RE", "we'll", "WE'LL", "he'd", "HE'D",
    "it's", "IT'S", "don't", "DON'T", "can't", "won't", "they've", "She's", "'s", "'S",
    "'re", "'ll", "'d", "'m", "'t", "'ve", "'x", "''", "'", "rock 'n' roll",
    "the dog's bone", "James' book", "o'clock", "l'homme", "I'll've", "y'all'd've",
    "'tis", "it\u2019s", "don\u2019t", " 's", "x's's")

# --- punctuation runs ---
add("!!!", "???", "...", "?!?!", "--", "---", "—", "a—b", "(a)", "[b]", "{c}", "<d>",
    "a.b.c", "a,b;c:d", "!!! hi ???", " !", "  !", "\n!", "*bold* _it_ `code`",
    "#hashtag @mention", "a&b|c^d~e", "~/.bashrc", "\\n is not a newline", "\"quoted\"",
    "'single'", "\u00abguillemets\u00bb", "\u201ccurly\u201d", "\u00bfQu\u00e9?", "\u00a1Hola!",
    "....!!!!????", "====", "////", "****", "-_-", "^_^", ":-)", "<3", "+/-", "->", "=>",
    "!=", "<=", ">=", "&&", "||", "::", "...and", "end.", "e.g.", "i.e.,")

# --- code ---
add("def foo(x):\n    return x * 2\n",
    "int main(void)\n{\n\treturn 0;\n}\n",
    "for (int i = 0; i < n; i++) {\n        sum += a[i];\n    }",
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name;",
    "#include <stdio.h>\n",
    "if x == 1:\n\tprint('one')\nelif x == 2:\n\tprint(\"two\")",
    "const f = (a, b) => a + b;",
    "    indented four\n        indented eight",
    "<div class=\"main\"><p>Hello</p></div>",
    "$ ls -la | grep foo > out.txt 2>&1",
    "x = [1, 2, 3]\ny = {'a': 1}\n",
    "fn main() { println!(\"hi\"); }",
    "// comment\n/* block */\n# hash",
    "a_b_c snake_case CamelCase kebab-case SCREAMING_CASE",
    "__init__ __name__ == '__main__'",
    "std::vector<int> v{1,2,3};",
    "print(f\"{x:>10}\")",
    "\t\tdeeply\n\t\t\tnested")

# --- JSON / URLs / markup ---
add("{\"name\": \"Alice\", \"age\": 30, \"tags\": [\"a\", \"b\"]}",
    "{\"a\":{\"b\":{\"c\":[1,2,{\"d\":null}]}}}",
    "[true, false, null, 1.5e10, -0.0]",
    "{\n  \"key\": \"value\",\n  \"n\": 42\n}",
    "https://example.com/path?query=1&x=y#frag",
    "http://user:pass@host.example.org:8080/a/b.html",
    "mailto:someone@example.com", "ftp://ftp.example.com/pub/file.tar.gz",
    "www.example.co.uk", "C:\\Users\\name\\file.txt", "/usr/local/bin/python3",
    "# Title\n\n## Subtitle\n\n- item 1\n- item 2\n", "| a | b |\n|---|---|\n| 1 | 2 |",
    "> quoted line\n>> nested", "```python\nprint(1)\n```")

# --- Unicode scripts and categories ---
add("Привет, мир!", "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया",
    "สวัสดีชาวโลก", "안녕하세요 세계", "こんにちは世界", "カタカナとひらがな", "你好，世界！",
    "繁體中文測試", "Ünïcödé äöü ß ÄÖÜ", "façade naïve résumé", "Ærøskøbing", "İstanbul ılık",
    "Łódź żółć", "Việt Nam", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ", "ﬁ ﬂ ligatures", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙",
    "𝟙𝟚𝟛", "ᚠᛇᚻ runes", "Ⅻ", "µ vs μ", "Ω vs Ω", "K vs K", "℃ ℉ ™ © ®", "∑∫∂√∞≈≠",
    "→ ← ↑ ↓ ⇒", "♠♣♥♦", "☃☂☀", "★☆✓✗", "€£¥₹₿", "§¶†‡", "°±×÷",
    "a\u0308\u0304", "\u0915\u094d\u0937", "\u0e01\u0e34\u0e4a", "\u05e9\u05c1\u05b8",
    "\u0301leading combining", " \u0301", "\u200d", "a\u200db", "\u2060word\u2060",
    "\ue000 private use", "\U000f0000", "\u0378 unassigned", "\U0001fbf0",
    "\u00ad soft hyphen", "\u061c\u200e\u200f marks", "\U0001D11E music")

# --- emoji ---
add("😀", "😀😃😄", "hello 😀 world", "👍🏽", "👩🏾‍💻", "🏳️‍🌈", "🇯🇵🇺🇸", "❤️", "❤",
    "1️⃣", "#️⃣", "🧑‍🤝‍🧑", "👨‍👩‍👧", "🙂🙃", "emoji😀glued", " 😀", "  😀", "😀\n😀",
    "🤖: beep boop", "🎉🎉🎉 party 🎉")

# --- long words and texts ---
add("supercalifragilisticexpialidocious", "Pneumonoultramicroscopicsilicovolcanoconiosis",
    "a" * 100, "ab" * 60, "x" * 500, "Donaudampfschifffahrtsgesellschaftskapitän",
    "antidisestablishmentarianism" * 3, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "ThisIsAVeryLongCamelCaseIdentifierName",
    "!" * 80, "-" * 120, "." * 64, "=" * 30 + "\n" + "=" * 30, "🙂" * 30,
    "日本語" * 40, "0123456789" * 10, "\u0301" * 20)

add("The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!",
    "Pack my box with five dozen liquor jugs; how vexingly quick daft zebras jump.",
    "It was the best of times, it was the worst of times, it was the age of wisdom, "
    "it was the age of foolishness, it was the epoch of belief, it was the epoch of "
    "incredulity, it was the season of Light, it was the season of Darkness.",
    "Dear Sir or Madam,\n\nI am writing to complain about order #12345 (placed on "
    "2024-03-01). The item arrived damaged!!! Please refund $49.99 ASAP.\n\nRegards,\nJ. Doe",
    "Q: What's 2+2?\nA: It's 4.\n\nQ: Who're you?\nA: I'm SmolLM.",
    "user: hello\nassistant: hi there\nuser: bye",
    "Ticket #4521: Printer on floor 3 won't print; error code E-0042. Tried restarting "
    "twice. Urgent!! Meeting at 14:00.")

# --- control characters ---
add("\x00", "a\x00b", "\x01\x02\x03", "\x7f", "bell\x07", "esc\x1b[31mred\x1b[0m",
    "\x1f\x1e", "a\x08b", "\x0e\x0f")

# --- seeded random mixtures over a pool that stresses the regexes ---
pool = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") * 3 +
        list("0123456789") * 2 +
        list("     ") * 4 + ["\n", "\n", "\t", "\r\n", "\r", "\u00a0", "\u3000", "\u0085"] +
        list("'''.,;:!?-_()[]{}<>/\\\"@#$%^&*+=~`|") +
        ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL"] +
        list("éüñçøßæœ") + list("日本語中文한국어") + list("Привет") + list("αβγ") +
        ["\u0301", "\u0308", "😀", "👍🏽", "\u200d", "\u0661", "\u00bd", "\u2460", "€", "→", "∑"])
rng = random.Random(20240509)
for n in range(120):
    length = rng.randint(1, 40 if n < 100 else 200)
    add("".join(rng.choice(pool) for _ in range(length)))

# words with random whitespace separators
words = ["hello", "world", "I've", "don't", "42", "3.5", "x", "foo_bar", "(a)", "日本",
         "😀", "naïve", "end.", "HTTP/1.1", "'quoted'", "-->", "1000000"]
seps = [" ", "  ", "\n", "\n\n", "\t", " \n", "\r\n", "   ", ""]
for n in range(60):
    k = rng.randint(2, 12)
    add("".join(rng.choice(words) + rng.choice(seps) for _ in range(k)))

if len(cases) < 300:
    sys.exit("battery has only %d cases" % len(cases))
for s in cases:
    s.encode("utf-8")           # raises on lone surrogates: every case must be valid UTF-8

out = sys.argv[1] if len(sys.argv) > 1 else "test/golden/tokenizer_inputs.txt"
with open(out, "w", encoding="utf-8") as f:
    for s in cases:
        f.write(json.dumps(s, ensure_ascii=True) + "\n")
print("%d cases -> %s" % (len(cases), out))
