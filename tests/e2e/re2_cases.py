#!/usr/bin/env python3
"""re2_cases.py SEED N — lines "HEX(regex) HEX(value)" for the differential
test of selector regexes (tests/e2e/test_selector_re2.sh): profd's
(build/rematch) against Go's regexp as Prometheus compiles a matcher
(build/oracle regex). A fixed list of regexes where PCRE2 and RE2 read the
same text differently (each was once a bug), then N random ones from pieces
of both syntaxes, each on a set of values (ASCII, case-fold corner cases such
as U+212A KELVIN SIGN and U+017F LONG S, scripts, newlines)."""
import random
import sys

FIXED = [
    r"(?i)\w", r"(?i)\W", r"(?i)[\W]", r"(?i)[^\w]", r"(?i)[[:upper:]]", r"(?i)[[:^alpha:]]", r"(?i)[[:ascii:]]",
    r"(?i)\n", r"(?i)[\t]", r"(?i)k", r"(?i)[^k]", r"[\s-a]", r"[\d-z]", r"[[:alpha:]-z]", r"[\pL-z]", r"[\d--]",
    r"\p{Greek}", r"\P{Greek}", r"\p{Han}", r"\p{Latin}", r"\p{Common}", r"(?m)^$", r"(?m)a$", r"a$", r"(?-s).",
    r".", r"\s", r"\S", r"[\S]", r"\v", r"[\v]", r"\x41", r"\101", r"\0", r"a{,2}", r"a{2}", r"\Qa.b\E", r"[]a]",
    r"[^]a]", r"(?U)a+", r"x*?y", r"\b", r"a\b", r"\Ba", r"[[:word:]]+", r"(?i)straße", r"\pN", r"[^\pL]", r"(?:a|ab)(c|bcd)",
]
ATOMS = [
    "a", "k", "K", "s", "S", "x", "\u212a", "\u017f", "é", "α", "Ω", ".", "\\w", "\\W", "\\d", "\\D", "\\s", "\\S",
    "\\pL", "\\PL", "\\pN", "\\p{Greek}", "\\p{Han}", "\\p{Latin}", "[[:alpha:]]", "[[:^alpha:]]", "[[:upper:]]",
    "[[:^lower:]]", "[[:word:]]", "[[:^word:]]", "[[:punct:]]", "[[:^space:]]", "[[:ascii:]]", "[\\w-]", "[^\\w]",
    "[\\W\\d]", "[^\\Wk]", "[a-z]", "[^a-z]", "[\\s-a]", "[\\d-z]", "[^[:^alpha:]_]", "\\n", "\\t", "\\x41", "\\101",
    "\\x{263a}", "\\Qa.\\E", "\\{", "[\\[]", "a{,2}", "{", "}", "]", "\\v", "[^\\S]",
]
ASSERTIONS = ["\\b", "\\B", "^", "$", "(?m)^", "(?m)$", "\\A", "\\z"]
FLAGS = ["(?i)", "(?-i)", "(?m)", "(?s)", "(?-s)", "(?U)"]
VALUES = [
    "", "a", "A", "k", "K", "\u212a", "s", "S", "\u017f", "é", "É", "_", "-", " ", "1", "x", "y", "xy", "ab", "aa",
    "\n", "a\n", "\na", "\t", "\x0b", "\u263a", "\u00b7", "\u0342", "\u3001", "α", "Ω", "ω", "\u2126", "{", "}", "]",
    "[", "a.b", "axb", "straße", "STRASSE", "Kk_", "ak", "a1",
]


def gen(rnd, depth=0):
    out = ""
    for _ in range(rnd.randint(1, 4)):
        r = rnd.random()
        if r < 0.1 and depth < 3:
            out += rnd.choice(["(", "(?:", "(?i:", "(?-i:"]) + gen(rnd, depth + 1) + ")"
        elif r < 0.18:
            out += rnd.choice(FLAGS)
            continue
        elif r < 0.25:
            out += rnd.choice(ASSERTIONS)
            continue
        else:
            out += rnd.choice(ATOMS)
        if rnd.random() < 0.3:
            out += rnd.choice(["*", "+", "?", "{1,2}", "*?"])
        if rnd.random() < 0.1:
            out += "|"
    return out


def main():
    rnd = random.Random(int(sys.argv[1]))
    n = int(sys.argv[2])
    regexes = FIXED + [gen(rnd) for _ in range(n)]
    for r in regexes:
        vals = VALUES if r in FIXED else rnd.sample(VALUES, 6) + ["".join(rnd.choice(VALUES) for _ in range(3))]
        for v in vals:
            print(r.encode().hex(), v.encode().hex())


main()
