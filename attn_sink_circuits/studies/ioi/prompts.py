"""Indirect object identification (IOI, Wang et al. 2022), generated here.

A prompt names two people, then repeats one of them (the subject S) as the giver; the model
should complete with the other one (the indirect object IO):

    "When Mary and John went to the store, John gave a drink to" -> " Mary" (IO), not " John" (S)

Templates, names, places and objects below are written for this project (in the spirit of the
paper's, not copied). Both name orders are used (ABBA: IO first; BABA: S first). The corrupted
partner is one of `PARTNERS`:

- `abc` (the library's default): the paper's ABC prompt, the same template, place and object
  with the IO, S1 and S2 slots filled by three other distinct names, so that no name is
  repeated and the position of the repetition carries no information (13 of 14 positions of a
  typical prompt differ from the clean one in at most three names);
- `s2_io_flip` (MIB's default, `s2_io_flip_counterfactual`): the second mention of S replaced
  by IO, every token before it identical, so that the partner repeats the other name and the
  right answer flips to S.
- `abc_before_s2` (a control, no paper's): ABC's change where `s2_io_flip` changes nothing,
  the IO and S1 slots filled by two other names and S2 kept, so that no name is repeated and
  the positions before S2 differ; with the two partners above it tells which positions a
  circuit found on one of them carries.

The same seed gives the same clean prompts under either partner. Metric: logit(IO) - logit(S) at
the last (real) position (`Pairs.metric`). Every name, place and object must be one token with
its leading space for the tokenizer at hand (`check_vocabulary`). Pairs of one run have one token
length, so only the templates of the most common token length are used (`ioi_pairs` says which),
unless they are padded (`pad=True`: every template, right-padded, the metric read at each
pair's last real token, as MIB does).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from attn_sink_circuits.discovery.pairs import Pairs, tokenize

NAMES = (
    "Mary", "John", "Anna", "James", "Sarah", "David", "Laura", "Michael", "Emma", "Robert",
    "Lisa", "Thomas", "Kate", "Daniel", "Alice", "Peter", "Helen", "Paul", "Rose", "Mark",
    "Jane", "Tom", "Grace", "Steven", "Julia", "Kevin", "Amy", "Brian", "Lucy", "Jack",
    "Ruth", "Henry", "Clara", "George", "Nancy", "Frank", "Diana", "Adam", "Karen", "Eric",
)  # fmt: skip
PLACES = (
    "store", "park", "school", "house", "garden", "station", "office", "market", "hospital",
    "beach", "restaurant", "church", "library", "river", "hotel",
)  # fmt: skip
OBJECTS = (
    "drink", "book", "ring", "ball", "bag", "snack", "key", "letter", "flower", "basket",
    "pen", "computer", "cake", "bottle", "phone",
)  # fmt: skip
TEMPLATES = (
    "When {A} and {B} went to the {PLACE}, {C} gave a {OBJECT} to",
    "After {A} and {B} arrived at the {PLACE}, {C} handed a {OBJECT} to",
    "Once {A} and {B} got to the {PLACE}, {C} sent a {OBJECT} to",
    "While {A} and {B} were at the {PLACE}, {C} passed a {OBJECT} to",
    "Later {A} and {B} walked to the {PLACE}. {C} brought a {OBJECT} to",
    "Since {A} and {B} were in the {PLACE}, {C} offered a {OBJECT} to",
    "Today {A} and {B} stopped by the {PLACE}. {C} gave a {OBJECT} to",
    "Then {A} and {B} went to the {PLACE}. {C} gave a {OBJECT} to",
)
"""{A} and {B} are the first two names, {C} the repeated one (the subject, S2); the IO is the
one of A / B that C is not. No template starts with a name: a name is one token only with its
leading space."""

PARTNERS = {
    "abc": "three other distinct names in the IO, S1 and S2 slots (Wang et al.'s ABC)",
    "s2_io_flip": "the second S replaced by IO, every token before it identical (MIB's default)",
    "abc_before_s2": "the IO and S1 slots filled by two other names, S2 kept (a control: what "
    "ABC changes and s2_io_flip does not)",
}
"""Corrupted partner name -> what it is."""


@dataclass(frozen=True)
class IOIPrompt:
    """One clean prompt with its partner (`PARTNERS`): `io` and `s` are the names (no space)."""

    clean: str
    corrupt: str
    io: str
    s: str
    template: int
    order: str  # "ABBA" (IO first) or "BABA" (S first)

    def row(self) -> dict:
        """The pairs-file row: clean, corrupt, answer (" IO"), wrong (" S")."""
        return {"clean": self.clean, "corrupt": self.corrupt, "answer": f" {self.io}",
                "wrong": f" {self.s}"}  # fmt: skip


def check_vocabulary(tokenizer) -> dict[str, list[str]]:
    """Names, places and objects that are NOT one token with a leading space, by list (an empty
    dict: every word is one token)."""
    bad: dict[str, list[str]] = {}
    for label, words in (("names", NAMES), ("places", PLACES), ("objects", OBJECTS)):
        multi = [w for w in words if len(tokenizer.encode(f" {w}", add_special_tokens=False)) != 1]
        if multi:
            bad[label] = multi
    return bad


def _fill(template: str, a: str, b: str, c: str, place: str, obj: str) -> str:
    return template.format(A=a, B=b, C=c, PLACE=place, OBJECT=obj)


def ioi_prompts(
    n: int,
    seed: int = 0,
    *,
    names=NAMES,
    places=PLACES,
    objects=OBJECTS,
    templates=TEMPLATES,
    partner: str = "abc",
) -> list[IOIPrompt]:
    """`n` IOI prompts with their `partner` prompts (`PARTNERS`): template, order (ABBA / BABA,
    alternating), names, place and object drawn with a seeded `random.Random(seed)` (the same
    draws, so the same clean prompts, for every partner)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if partner not in PARTNERS:
        raise ValueError(f"unknown IOI partner {partner!r}; use one of {', '.join(PARTNERS)}")
    if len(names) < 5:
        raise ValueError(f"the ABC corruption needs at least 5 names, got {len(names)}")
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = rng.randrange(len(templates))
        io, s, c1, c2, c3 = rng.sample(list(names), 5)
        place, obj = rng.choice(places), rng.choice(objects)
        order = "ABBA" if i % 2 == 0 else "BABA"
        a, b = (io, s) if order == "ABBA" else (s, io)
        clean = _fill(templates[t], a, b, s, place, obj)
        if partner == "abc":
            corrupt = _fill(templates[t], c1, c2, c3, place, obj)
        elif partner == "abc_before_s2":
            corrupt = _fill(templates[t], c1, c2, s, place, obj)
        else:
            corrupt = _fill(templates[t], a, b, io, place, obj)
        out.append(IOIPrompt(clean, corrupt, io, s, t, order))
    return out


def ioi_pairs(
    model,
    n: int,
    seed: int = 0,
    *,
    partner: str = "abc",
    pad: bool = False,
    bos: bool | None = None,
) -> tuple[Pairs, list[IOIPrompt]]:
    """`n` IOI pairs tokenized for `model` with their `partner` prompts (`PARTNERS`). Without
    `pad`, all of one token length: prompts are drawn from the templates whose length is the
    most common one for this tokenizer. With `pad`, from every template, right-padded to the
    longest (the metric read at each pair's last real token, as MIB does). `bos`: see
    `attn_sink_circuits.discovery.pairs.tokenize`. Raises when a word of the lists is not one token."""
    bad = check_vocabulary(model.tokenizer)
    if bad:
        raise ValueError(
            f"IOI words that are not one token for this tokenizer: {bad}; remove them from "
            "attn_sink_circuits.studies.ioi.prompts lists or pass lists of single-token words"
        )
    lengths = {}  # a BOS adds one token to every template alike: probed without
    for t, template in enumerate(TEMPLATES):
        probe = _fill(template, NAMES[0], NAMES[1], NAMES[1], PLACES[0], OBJECTS[0])
        lengths[t] = int(model.to_tokens(probe).shape[1])
    common = Counter(lengths.values()).most_common(1)[0][0]
    kept = [t for t, n_tok in lengths.items() if pad or n_tok == common]
    prompts = ioi_prompts(n, seed, templates=tuple(TEMPLATES[t] for t in kept), partner=partner)
    prompts = [IOIPrompt(p.clean, p.corrupt, p.io, p.s, kept[p.template], p.order) for p in prompts]
    return tokenize(model, [p.row() for p in prompts], "ioi", pad=pad, bos=bos), prompts


def name_positions(pairs: Pairs) -> dict[str, list[int]]:
    """Per clean prompt, the token positions of the IO name, the first S and the second S."""
    out: dict[str, list[int]] = {"io": [], "s1": [], "s2": []}
    for row, io, s in zip(pairs.clean.tolist(), pairs.answer.tolist(), pairs.wrong.tolist(),
                          strict=True):  # fmt: skip
        s_at = [i for i, t in enumerate(row) if t == s]
        out["io"].append(row.index(io))
        out["s1"].append(s_at[0])
        out["s2"].append(s_at[-1])
    return out


def saved_run_pairs(model, summary: dict, partner: str | None = None) -> tuple[Pairs, Pairs]:
    """(fit pairs, held-out pairs) of a saved IOI run (`IOIResult.save`; its summary.json as a
    dict), made again from its record (pair seed, partner, protocol, split) and refused unless
    every pair hashes as the run recorded, so what is computed on them is on the run's texts.
    With `partner` (`PARTNERS`), the same clean prompts, answers and split with that partner's
    corrupted prompts instead (refused unless only the corrupted prompts changed)."""
    from attn_sink_circuits.discovery.protocol import protocol, protocol_name
    from attn_sink_circuits.runs.provenance import texts_identity

    record, command = summary["provenance"], summary["provenance"]["command"]
    seed = int(command[command.index("--pair-seed") + 1]) if "--pair-seed" in command else 0
    seed = summary.get("pair_seed", seed)  # recorded by runs since the study's `run`
    texts = record["texts"]
    n_fit, n = len(texts["fit_indices"]), texts["n"]
    proto = protocol(protocol_name(summary["protocol"]) or "")

    def made(with_partner: str) -> Pairs:
        return ioi_pairs(model, n, seed=seed, partner=with_partner, pad=proto.pad,
                         bos=proto.bos)[0]  # fmt: skip

    pairs = made(summary["partner"])
    again = texts_identity(pairs.rows(), split=(range(n_fit), range(n_fit, n)))
    if again["sha256"] != texts["sha256"]:
        raise ValueError(
            f"the pairs made again do not hash as the run's ({texts['sha256']}): it was made "
            "by other pair code or with a seed its command does not show"
        )
    if partner is not None and partner != summary["partner"]:
        other = made(partner)
        if any(getattr(pairs, k).tolist() != getattr(other, k).tolist()
               for k in ("clean", "answer", "wrong")):  # fmt: skip
            raise ValueError(
                f"partner {partner!r} changes the run's clean prompts or answers, not only the "
                "corrupted prompts: its pairs are not the run's texts"
            )
        pairs = other
    return pairs[:n_fit], pairs[n_fit:]


__all__ = [
    "NAMES",
    "OBJECTS",
    "PARTNERS",
    "PLACES",
    "TEMPLATES",
    "IOIPrompt",
    "check_vocabulary",
    "ioi_pairs",
    "ioi_prompts",
    "name_positions",
    "saved_run_pairs",
]
