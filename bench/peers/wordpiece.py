"""wordpiece: a pure-Python BERT tokenizer, for the Python embedding baseline.

What: Tokenizer(vocab_path, lowercase=True).encode(text, max_len) -> [CLS] ids [SEP],
the ids Hugging Face's BertTokenizer gives for the same vocab.txt.

How, as transformers' BasicTokenizer + WordpieceTokenizer do it:
  1. clean: drop NUL, U+FFFD and control characters (category C*, except tab,
     newline and carriage return, which are whitespace); any whitespace -> ' '.
  2. put spaces around CJK ideographs, so each is its own word.
  3. NFC-normalize, split on whitespace; per word: lowercase, then strip accents
     (NFD, drop Mn marks) when lowercasing; split off every punctuation
     character (ASCII symbol ranges, or Unicode category P*) as its own word.
  4. WordPiece each word: greedy longest match from the left, continuations
     spelled '##piece'; a word with no full cover, or over 100 characters, is
     [UNK].
Truncation keeps the first max_len - 2 pieces, then adds [CLS] and [SEP].

Rejected: Hugging Face's `tokenizers` (Rust) package: the baseline is meant to
be what a Python server does with what Debian ships (no transformers, no
tokenizers package), and a Rust tokenizer would hide Python's own cost.
Written from the transformers documentation/behaviour, not copied.
"""
import unicodedata

MAX_WORD_CHARS = 100  # transformers' WordpieceTokenizer.max_input_chars_per_word

# CJK Unified Ideographs blocks, as BasicTokenizer._is_chinese_char lists them
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def _is_punct(ch):
    cp = ord(ch)
    # ASCII symbols like '$' and '^' are not category P but BERT splits them too
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp):
    return any(lo <= cp <= hi for lo, hi in _CJK)


class Tokenizer:
    def __init__(self, vocab_path, lowercase=True):
        with open(vocab_path, encoding="utf-8") as f:
            tokens = [line.rstrip("\n") for line in f]
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.lowercase = lowercase
        for special in ("[CLS]", "[SEP]", "[UNK]"):
            if special not in self.vocab:
                raise ValueError("%s: no %s token" % (vocab_path, special))
        self.cls = self.vocab["[CLS]"]
        self.sep = self.vocab["[SEP]"]
        self.unk = self.vocab["[UNK]"]

    def _clean(self, text):
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or _is_control(ch):
                continue
            if _is_whitespace(ch):
                out.append(" ")
            elif _is_cjk(cp):
                out.append(" %s " % ch)
            else:
                out.append(ch)
        return "".join(out)

    def _words(self, text):
        """Basic tokenization: cleaned, lowercased/accent-stripped, punctuation-split words."""
        text = unicodedata.normalize("NFC", self._clean(text))
        for word in text.split():
            if self.lowercase:
                word = word.lower()
                word = "".join(c for c in unicodedata.normalize("NFD", word)
                               if unicodedata.category(c) != "Mn")
            cur = []
            for ch in word:
                if _is_punct(ch):
                    if cur:
                        yield "".join(cur)
                        cur = []
                    yield ch
                else:
                    cur.append(ch)
            if cur:
                yield "".join(cur)

    def _pieces(self, word, out):
        if len(word) > MAX_WORD_CHARS:
            out.append(self.unk)
            return
        start, ids = 0, []
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                tid = self.vocab.get(piece)
                if tid is not None:
                    ids.append(tid)
                    break
                end -= 1
            if end == start:  # no piece matches here: the whole word is unknown
                out.append(self.unk)
                return
            start = end
        out.extend(ids)

    def tokenize(self, text):
        """text -> WordPiece ids, without [CLS]/[SEP]."""
        out = []
        for word in self._words(text):
            self._pieces(word, out)
        return out

    def encode(self, text, max_len):
        """text -> [CLS] ids [SEP], the ids cut to max_len - 2."""
        return [self.cls] + self.tokenize(text)[:max_len - 2] + [self.sep]
