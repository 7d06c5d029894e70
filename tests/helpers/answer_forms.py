"""Every form in which a student would recognise a question's answer, derived from the bank's
own answer (its value, the right option, and the explanation and feedback it reveals), and
a search for those forms in what a student has read.

Forms, and how far back they are searched:

* the value — ``0.273``, ``27.3 %``, ``27 %``, ``3/11`` (and any fraction the explanation
  writes for it, such as ``3/9``); integers and two-digit roundings only in the question's own
  lesson (``12`` or ``27 %`` elsewhere are other things); a whole number under 10 only in its
  context there (``DP = 8`` for the size asked, ``4×`` for a factor, "5 warm-up forwards" for
  a count, "ratio = 3"); a whole number of 10 or more, in any lesson read before, next to
  three of its prompt's words ("1F1B … 48 messages per step");
* for an answer equal to a result the prompt gives (GPipe's 42, 1F1B's?), the explanation's
  "same bubble" said of the question's subject, in any lesson read before (a table of
  contents);
* the closed form — the formulas of the explanation (and of the right option and its
  feedback, for a choice), in the lesson's own symbols, normalised (``(P−1)/(V·M)`` = ``(P - 1) /
  (M * V)``): the one the answer equals everywhere, the steps towards it in the question's own
  lesson; short ones (``P − 1``) where a number is said to equal them, as a whole
  expression, in its lesson; its rules between sizes (``M ≥ P``, also written
  "n_microbatches ≥ the number of stages") in its lesson; its per-rank statements ("rank r
  postpones up to r …") everywhere;
* the closed form at a shown setting — a line of the same lesson that names ``P=4 M=8
  V=2`` and prints the formula's value there (a figure's title showing the ratio for a
  neighbouring setting);
* the right option itself (one too short to search alone, ``TP`` or ``TP = 4``, as whole
  tokens in a sentence with two words of the asking sentence and no other option); for a
  prediction also the numbers only it has (``1e-7``) and its key words (the words of its
  claim, before any ``:``, that no other option has: two or more, or one of four letters or
  more) in one sentence with as many of the prompt's words, in the question's own lesson;
* for ``order`` questions, a rank's whole row.

Quizzes are searched for the value and the right option only: a quiz checks what the lesson
taught, so its formula is expected above it; its number is not. Every prediction has at least
one form (tests/notebooks/test_answer_forms.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

#: symbols a closed form is written in; single capitals are the course's sizes and costs
SYMBOL = r"(?:tf|tb|tw|tI|F&B|Ψ|[A-Z](?:_\w+)?|[rkisbhac])"
STOP = set("""a an the of to in on at by for and or is are be it its this that with as from
than then so not no one two all any each every per only same what which how many much
does do it's their there rank ranks""".split())


@dataclass(frozen=True)
class Form:
    """One recognisable form of an answer: what it is, its text, where it is searched.

    A form is found by ``pattern`` (in the text, or in the normalised text for a formula),
    or, for key words, as a sentence holding every ``key`` word and two ``subject`` words."""
    what: str
    text: str
    scope: str                       # "lesson": the question's own lesson; "course": all
    pattern: re.Pattern | None = None
    normalised: bool = False
    key: frozenset = frozenset()
    subject: frozenset = frozenset()
    phrase: tuple = ()
    near: frozenset = frozenset()    # for a pattern: words of which ``need`` share its sentence
    need: int = 0
    unless: re.Pattern | None = None  # … and a sentence that also holds this does not count
    window: int = 0                   # … counted this many characters either side, not in all

    def find(self, text: str) -> str | None:
        """The passage of ``text`` holding this form, or None."""
        if self.near and self.need:
            return self._find_near(text)
        if self.phrase:
            for sentence in re.split(r"(?<=[.!?])\s+|\n", text):
                tokens = _tokens(sentence)
                n = len(self.phrase)
                if any(tuple(tokens[i:i + n]) == self.phrase for i in range(len(tokens))):
                    return " ".join(sentence.split())[:200]
            return None
        if self.key:
            for sentence in re.split(r"(?<=[.!?])\s+|\n\s*\n|\n\s*[-*|#]", text):
                words = _words(sentence)
                if self.key <= words and len(self.subject & words) >= min(2, len(self.key)):
                    return " ".join(sentence.split())[:200]
            return None
        text = symbolise(text) if self.what == "rule" else text   # "M ≥ P" in words too
        text = normalise(text) if self.normalised else text
        m = self.pattern.search(text)
        if m is None:
            return None
        return " ".join(text[max(0, m.start() - 60):m.end() + 60].split())


    def _find_near(self, text: str) -> str | None:
        """The sentence holding the pattern and ``need`` of the ``near`` words."""
        for sentence in re.split(r"(?<=[.!?])\s+|\n\s*\n|\n\s*[-*|#]", text):
            if self.unless is not None and self.unless.search(sentence):
                continue
            for m in self.pattern.finditer(sentence):
                around = sentence[max(0, m.start() - self.window):m.end() + self.window] \
                    if self.window else sentence
                if len(self.near & _words(around)) >= self.need:
                    return " ".join(around.split())[:200]
        return None


def normalise(text: str) -> str:
    """Formulas written any way the lessons write them, as one string: Unicode operators
    to ASCII, no spaces around operators, products of two sizes sorted (V·M = M·V), no
    multiplication signs ((P−1)·(tf+tb) = (P−1)(tf+tb))."""
    for a, b in (("−", "-"), ("–", "-"), ("·", "*"), ("×", "*"), ("⋅", "*"), ("÷", "/"),
                 ("`", ""), ("**", ""), (">=", "≥"), ("<=", "≤")):
        text = text.replace(a, b)
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\s*([-+*/=(),≥≤])\s*", r"\1", text)
    text = re.sub(r"(?<![A-Za-z])([A-Z])\*([A-Z])(?![A-Za-z])",
                  lambda m: "*".join(sorted(m.groups())), text)
    return text.replace("*", "")


def _number(text: str) -> re.Pattern:
    """``text`` as a number: not part of a longer number; ``%`` may follow a space, and a
    number that is not a percentage is not followed by one (37.5 GB is not 37.5 %), nor by a
    letter (128K tokens are not 128 GB), nor preceded by one (fp32 and H100 are names)."""
    body = re.escape(text).replace("%", r"\s?%").replace("/", r"\s?/\s?")
    end = r"(?![\d]|[.,]\d|\s?%|[A-Za-z])" if text[-1].isdigit() else ""
    return re.compile(r"(?<![\d.,A-Za-z])" + body + end)


def _fraction_forms(value: float, texts: list[str], lowest: bool = True) -> list[str]:
    """``p/q`` forms of ``value``: its lowest terms (a share), and any equal fraction the
    texts write."""
    out = []
    frac = Fraction(value).limit_denominator(64)
    if lowest and frac.denominator > 1 and abs(float(frac) - value) < 1e-9:
        out.append(f"{frac.numerator}/{frac.denominator}")
    for text in texts:
        for p, q in re.findall(r"(?<![\d.])(\d+)\s?/\s?(\d+)(?![\d.])", text):
            if int(q) and abs(int(p) / int(q) - value) < 1e-9:
                out.append(f"{p}/{q}")
    return list(dict.fromkeys(out))


def value_forms(value: float, unit: str, texts: list[str]) -> list[Form]:
    """The value printed the ways the course prints numbers."""
    forms = []

    def add(text, scope, what="value"):
        if text not in [f.text for f in forms]:
            forms.append(Form(what, text, scope, _number(text)))

    if unit == "%":
        share = value / 100
        # a half, a third, a quarter: shares so common that only the question's lesson counts
        common = Fraction(share).limit_denominator(4)
        wide = "lesson" if abs(float(common) - share) < 1e-9 else "course"
        add(f"{value:.1f}%", wide)
        if abs(value - round(value)) > 1e-9:
            add(f"{value:.0f}%", "lesson")
        add(f"{share:.3f}", wide)
        add(f"{share:.2f}", "lesson")
        for f in _fraction_forms(share, texts):
            add(f, wide if int(f.split("/")[1]) > 2 else "lesson", "fraction")
    elif abs(value - round(value)) < 1e-9:
        if abs(value) >= 10:
            add(f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.0f}", "lesson")
    else:
        for text in (f"{value:.1f}", f"{value:.2f}", f"{value:.3g}"):
            add(text, "course" if "." in text else "lesson")
        for f in _fraction_forms(value, texts, lowest=False):
            add(f, "course", "fraction")
    return forms


_TOKEN = re.compile(r"\s*(min|max|tf|tb|tw|tI|F&B|\d+(?:\.\d+)?|[A-Za-zΨ]\w*|[()·*×÷/+\-−,])")
_WORD = re.compile(r"[A-Za-zΨ]\w*")


def _trim(tokens: list[str]) -> list[str]:
    """Without dangling operators at either end, and cut after the last point where every
    parenthesis opened so far is closed."""
    depth, cut = 0, 0
    for i, t in enumerate(tokens):
        depth += (t == "(") - (t == ")")
        if depth < 0:
            break
        if depth == 0:
            cut = i + 1
    tokens = tokens[:cut]
    while tokens and tokens[-1] in "(+-−·*×÷/,":
        tokens.pop()
    while tokens and tokens[0] in ")+·*×÷/,":
        tokens.pop(0)
    return tokens


def formulas(text: str, least: int = 5) -> list[str]:
    """The formulas in ``text``, normalised: runs of symbols, numbers and operators with at
    least one symbol, one operator and ``least`` tokens (``(P−1)/(V·M)``, ``min(P − r, M)``;
    ``P − 1`` with ``least=3``); inside parentheses a word is an operand too
    (``(1 − bubble ÷ total)``)."""
    out, run, depth = [], [], 0

    def close():
        tokens = _trim(run)
        inner, d = False, 0
        for t in tokens:
            d += (t == "(") - (t == ")")
            inner = inner or (d > 0 and bool(_WORD.fullmatch(t)) and len(t) > 2)
        has_symbol = inner or any(re.fullmatch(SYMBOL, t) or t in ("min", "max")
                                  for t in tokens)
        if has_symbol and any(t in "/·*×÷+-−" for t in tokens) and len(tokens) >= least:
            out.append(normalise("".join(tokens)))

    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        token = m.group(1) if m else None
        word = token is not None and bool(_WORD.fullmatch(token))
        ok = token is not None and (not word or depth > 0 or re.fullmatch(SYMBOL, token)
                                    or token in ("min", "max"))
        if ok and token == ",":
            ok = depth > 0
        if ok and m.group(0).startswith((" ", "\n")) and run and token[0].isalnum() and \
                run[-1][-1].isalnum():
            ok = False                          # "P M" is two words, not a product
        if not ok:
            if run:
                close()
            run, depth = [], 0
            pos = m.end() if m else pos + 1
            continue
        depth += (token == "(") - (token == ")")
        run.append(token)
        pos = m.end()
    if run:
        close()
    return list(dict.fromkeys(out))


RELATION = re.compile(r"(?<![\w])([A-Z])\s*(≥|≤|>=|<=)\s*(\d*[A-Z])(?![\w])")
#: the words the lessons and torch use for a size, as its symbol
SIZE_WORDS = (
    (r"\bn_microbatches\b|\b(?:the\s+)?number\s+of\s+microbatches\b", "M"),
    (r"\b(?:the\s+)?number\s+of\s+(?:pipeline\s+)?(?:stages|ranks)\b|\bpp_size\b", "P"),
    (r"\b(?:the\s+)?number\s+of\s+virtual\s+stages\b", "V"),
)


def symbolise(text: str) -> str:
    """``text`` with the sizes' names as symbols: "n_microbatches ≥ the number of stages"
    reads "M ≥ P"."""
    for words, symbol in SIZE_WORDS:
        text = re.sub(words, symbol, text, flags=re.I)
    return text


def relations(text: str) -> list[str]:
    """Rules between two sizes (``M ≥ P``, ``M ≥ 2P``, ``n_microbatches ≥ the number of
    stages``), normalised to symbols."""
    return list(dict.fromkeys(f"{a}{op.replace('>=', '≥').replace('<=', '≤')}{b}"
                              for a, op, b in RELATION.findall(symbolise(text))))


def _closed_form(f: str, scope: str) -> Form:
    start = r"(?<![\w.])" if f[0].isalnum() else ""
    end = r"(?![\w.])" if f[-1].isalnum() else ""
    return Form("closed form", f, scope, re.compile(start + re.escape(f) + end),
                normalised=True)


def closed_forms(q, texts: list[str], right: list[str]) -> list[Form]:
    """The formulas of the answer's texts. The answer's own closed form — one set equal to a
    number (``(P−1)/(V·M) = 3/24``), or one in the right option or its feedback — is searched
    everywhere; the steps towards it only in the question's own lesson (later lessons build
    on them)."""
    asked = set(formulas(q.prompt))
    forms = {}
    for text in texts:
        flat = normalise(text)
        for f in formulas(text):
            if f in asked:
                continue
            final = text in right or re.search(re.escape(f) + r"=[\d(]", flat)
            if final or f not in forms:
                forms[f] = _closed_form(f, "course" if final else "lesson")
        for f in short_formulas(text):
            if f not in asked and f not in forms:
                forms[f] = _short_form(f)
    return list(forms.values())


def short_formulas(text: str) -> list[str]:
    """Formulas of three or four tokens that a number is said to equal (``3 = P − 1``)."""
    flat = normalise(text)
    return [f for f in formulas(text, least=3) if f not in formulas(text)
            and (re.search(r"(?<![\w.])\d+(?:\.\d+)?=" + re.escape(f) + r"(?![\w(])", flat)
                 or re.search(r"(?<![\w)])" + re.escape(f) + r"=\d", flat))]


def _short_form(f: str) -> Form:
    """A short formula as a whole expression: ``P-1`` in "P − 1 times", not in "(P−1)/P"."""
    op = r"\w.()*/+\-^"
    return Form("closed form", f, "lesson",
                re.compile(rf"(?<![{op}])" + re.escape(f) + rf"(?![{op}])"), normalised=True)


def _stem(word: str) -> str:
    """A crude stem: postpone, postpones, postponed -> postpon; Ws -> w."""
    word = word.lower()
    for suffix in ("ing", "ed", "es", "e", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return word[:-len(suffix)]
    return word


def _tokens(text: str) -> list[str]:
    """Stemmed words and numbers, in order; a symbol such as ``Ws`` becomes ``w``."""
    raw = re.findall(r"[A-Za-zΨ][\w-]*|\d+(?:\.\d+)?", text.replace("'s", ""))
    return [w[0].lower() if re.fullmatch(r"[A-Z]s", w) else _stem(w) for w in raw]


def _words(text: str) -> set[str]:
    return set(_tokens(text)) - STOP


#: the per-rank index symbols: "rank r", "stage k", "worker i"
INDEX = ("r", "k", "i")


def symbol_phrases(text: str, n: int = 4) -> list[tuple[str, ...]]:
    """Per-rank statements in the lesson's symbols: runs of ``n`` stemmed tokens holding an
    index symbol (r, k, i) and a word of four letters or more ("postpon up to r")."""
    raw = re.findall(r"[A-Za-zΨ][\w-]*|\d+(?:\.\d+)?", text.replace("'s", ""))
    tokens = _tokens(text)
    out = []
    for i in range(len(tokens) - n + 1):
        gram = tuple(tokens[i:i + n])
        if any(raw[j] in INDEX for j in range(i, i + n)) and \
                any(len(t) >= 4 and t not in STOP and not t.isdigit() for t in gram):
            out.append(gram)
    return list(dict.fromkeys(out))


NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+|%)?")


def worked_forms(q) -> list[Form]:
    """For a prediction's right option, the decimals its feedback works out (``46.2%``,
    ``2.7``) that the prompt and the options do not give, in the question's own lesson: the
    prompt's numbers are the question's premises, the feedback's new ones its answer."""
    right = next(o for o in q.options if o.correct)
    given = set(NUMBER.findall(" ".join([q.prompt] + [o.text for o in q.options])))
    new = [n for n in dict.fromkeys(NUMBER.findall(right.feedback))
           if "." in n and n not in given and n.rstrip("%") not in given]
    return [Form("worked value", n, "lesson", _number(n)) for n in new]


def option_forms(q) -> list[Form]:
    """The right option as written, the numbers only it has (``1e-7``, ``33%``), and for a
    prediction its key words."""
    right = next(o for o in q.options if o.correct)
    others = " ".join([q.prompt] + [o.text for o in q.options if not o.correct])
    forms = [Form("value", n, "course" if re.search(r"[.e]|\d{3}", n) else "lesson",
                  _number(n)) for n in dict.fromkeys(NUMBER.findall(right.text))
             if n not in NUMBER.findall(others) and len(n) >= 2 and q.mode == "predict"]
    flat = " ".join(right.text.split())
    if len(flat) >= 8 and (re.search(r"[\d=/(]", flat) or len(flat) >= 25):
        forms.append(Form("option", flat, "course", re.compile(re.escape(flat), re.I)))
    if q.mode == "predict":
        others = set().union(*(_words(o.text) for o in q.options if not o.correct))
        claim = re.split(r"[:;]", right.text)[0]      # "It hangs: each rank's first …"
        key = _words(claim) - others - _words(q.prompt)
        subject = _words(q.prompt)
        if len(key) < 2 and not any(len(k) >= 4 and k.isalpha() for k in key):
            key = set()                  # "2" or "0" alone is in too many sentences
        if key and subject:
            forms.append(Form("key words", " + ".join(sorted(key)), "lesson",
                              key=frozenset(key), subject=frozenset(subject)))
    return forms


def question_sentence(prompt: str) -> str:
    """The sentence of ``prompt`` that asks (its last with a question mark)."""
    asking = [s for s in re.split(r"(?<=[.?!])\s+", prompt) if "?" in s]
    return asking[-1] if asking else prompt


def asked_symbols(prompt: str) -> list[str]:
    """Sizes the question asks for (``DP`` in "TP = 8, PP = 4. What is DP?"): symbols of
    its asking sentence that the prompt gives no value."""
    given = set(re.findall(r"([A-Za-z_]\w*)\s?=\s?[\d.]", prompt))
    found = re.findall(r"(?<![\w-])([A-Z]{1,3}|[A-Z]_\w+)(?![\w-])", question_sentence(prompt))
    return [s for s in dict.fromkeys(found) if s not in given]


def _near(q, but: str = "") -> frozenset:
    """The words of ``q``'s asking sentence (less those of ``but``): its context."""
    return frozenset(_words(question_sentence(q.prompt)) - _words(but))


def count_forms(q, n: int) -> list[Form]:
    """A small whole number only where its context makes it this answer: ``DP = 8`` for the
    size asked, ``4×`` or "factor of 4" for a factor, "5 warm-up forwards" for a count, or
    ``= 3`` next to two of the question's words."""
    asking = question_sentence(q.prompt)
    near = _near(q)
    num, end = rf"(?<![\w.,]){n}", r"(?![\w,]|\.\d|\s?%)"
    forms = [Form("value in context", f"{s} = {n}", "lesson",
                  re.compile(rf"(?<![\w]){re.escape(s)}\s?=\s?{n}{end}"))
             for s in asked_symbols(q.prompt)]
    if re.search(r"\b(?:times|factor|ratio)\b|÷", asking, re.I):
        forms.append(Form("value in context", f"{n}×", "lesson", re.compile(
            rf"{num}\s?(?:×|times\b|-fold)|(?:×|factor of)\s?{n}{end}"),
            near=near, need=1))
    many = re.search(r"how many ([a-z][\w-]*)", asking, re.I)
    if many and many.group(1).lower() != "times":
        noun = _stem(many.group(1))
        forms.append(Form("value in context", f"{n} {many.group(1)}", "lesson",
                          re.compile(rf"{num}\s+{re.escape(noun)}", re.I),
                          near=near, need=1))
    forms.append(Form("value in context", f"= {n}", "lesson",      # not "M = 4": a setting
                      re.compile(rf"(?:[a-z]{{3}}|\))\s?=\s?{n}{end}"),
                      near=near, need=min(2, len(near))))
    return forms


def setting_forms(q, value: float) -> list[Form]:
    """A whole-number answer (10 or more) in a sentence with three of its prompt's words (the
    same schedule, the same sizes): searched in every lesson a student has read."""
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.0f}"
    near = frozenset(w for w in _words(q.prompt) if not w[0].isdigit())
    return [Form("value in context", f"{text} with the prompt's words", "course",
                 _number(text), near=near, need=3, window=80)]


def _given_numbers(prompt: str) -> set[float]:
    """Numbers the prompt states as results (``takes 42``), not the sizes it sets (``P = 5``)."""
    out = set()
    for m in re.finditer(r"(?<![\w.,])(\d+(?:\.\d+)?)(?![\w.])", prompt):
        if not prompt[:m.start()].rstrip().endswith("="):
            out.add(float(m.group(1)))
    return out


def same_forms(q, value: float) -> list[Form]:
    """For an answer equal to a result the prompt gives ("GPipe takes 42; 1F1B?"), the
    explanation's "same bubble", "same makespan", said of the question's subject; searched
    in every lesson a student has read, a table of contents included."""
    if value not in _given_numbers(q.prompt):
        return []
    same = _stem("same")
    subject = frozenset(_near(q) - {same})
    return [Form("key words", f"same + {_stem(noun)}", "course",
                 key=frozenset({same, _stem(noun)}), subject=subject)
            for noun in dict.fromkeys(re.findall(r"\bsame (\w+)", q.explain))]


def _whole(text: str) -> re.Pattern:
    """``text`` as whole tokens, spaces around ``=`` optional."""
    body = re.sub(r"\\ ?=\\ ?", r"\\s?=\\s?", re.escape(text))
    return re.compile(r"(?<![\w.])" + body + r"(?![\w]|\.\d)")


def short_option_forms(q) -> list[Form]:
    """A right option too short to search alone (``TP``, ``TP = 4``): as whole tokens, in a
    sentence with two words of the question's asking sentence and no other option."""
    flat = " ".join(next(o for o in q.options if o.correct).text.split())
    if len(flat) >= 8 and (re.search(r"[\d=/(]", flat) or len(flat) >= 25):
        return []
    others = [" ".join(o.text.split()) for o in q.options if not o.correct]
    near = _near(q, flat)
    return [Form("option in context", flat, "lesson", _whole(flat), near=near,
                 need=min(2, len(near)),
                 unless=re.compile("|".join(_whole(o).pattern for o in others)))]


def order_forms(rows) -> list[Form]:
    return [Form("a rank's row", " ".join(r), "lesson",
                 re.compile(r"(?<![\w])" + r"\s+".join(r"\d*" + a for a in r) + r"(?![\d])"))
            for r in rows if len(r) >= 3]


def answer_forms(q) -> list[Form]:
    """Every form of ``q``'s answer the search looks for (see the module's docstring)."""
    right = next((o for o in q.options if o.correct), None)
    reveal_texts = [q.explain] + ([right.text, right.feedback] if right else [])
    forms = []
    if q.kind == "number":
        value = float(q.value())
        forms += value_forms(value, q.unit, reveal_texts)
        if value == round(value) and 0 < abs(value) < 10 and q.unit != "%":
            forms += count_forms(q, int(value))
        forms += same_forms(q, value)
        if value == round(value) and abs(value) >= 10 and q.mode == "predict":
            forms += setting_forms(q, value)
    elif q.kind == "choice":
        forms += option_forms(q) + short_option_forms(q)
        forms += worked_forms(q) if q.mode == "predict" else []
    else:
        forms += order_forms(q.value())
    if q.mode == "predict":
        prompt = set(relations(q.prompt))
        forms += closed_forms(q, reveal_texts, [right.text, right.feedback] if right else [])
        forms += [Form("rule", r, "lesson", re.compile(r"(?<![\w])" + re.escape(r) + r"(?![\w])"),
                       normalised=True)
                  for t in reveal_texts for r in relations(t) if r not in prompt]
        asked_words = set(symbol_phrases(q.prompt))
        forms += [Form("phrase", " ".join(g), "course", phrase=g)
                  for t in reveal_texts for g in symbol_phrases(t) if g not in asked_words]
    return list({(f.what, f.text): f for f in forms}.values())


PARAM = re.compile(r"\b([PMV])\s?=\s?(\d+)\b")


def value_at(formula: str, params: dict) -> float | None:
    """A normalised closed form in P, M and V evaluated at ``params``, or None."""
    tokens = re.findall(r"min|max|\d+(?:\.\d+)?|[PMV]|[-+/(),]|.", formula)
    if any(t not in "PMV-+/()," and not re.fullmatch(r"min|max|\d+(?:\.\d+)?", t)
           for t in tokens):
        return None                       # a symbol other than P, M, V
    used = {t for t in tokens if t in "PMV"}
    if not used or used - set(params):
        return None
    py = ""
    for prev, tok in zip([""] + tokens, tokens):
        if prev and (prev[-1].isalnum() or prev == ")") and (tok[0].isalnum() or tok == "("):
            py += "*"
        py += tok
    try:
        return float(eval(py, {"__builtins__": {}, "min": min, "max": max}, params))
    except (SyntaxError, ZeroDivisionError, TypeError, NameError):
        return None


def shown_settings_hits(forms, text: str) -> list[str]:
    """Lines of ``text`` naming a P/M/V setting and printing a closed form's value there."""
    hits = []
    for line in text.splitlines():
        params = {k: int(v) for k, v in PARAM.findall(line)}
        if len(params) < 2:
            continue
        for f in forms:
            if f.what != "closed form":
                continue
            v = value_at(f.text, params)
            if v is None or v <= 0 or v >= 10:
                continue
            for shown in {f"{100 * v:.1f}%", f"{v:.3f}"}:
                if _number(shown).search(line):
                    hits.append(f"{f.text} at {params} = {shown}: {line.strip()[:160]}")
    return hits
