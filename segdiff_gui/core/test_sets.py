"""Which images make a whole test set, so that shards merged from a cluster are never shown as
the whole set when some are missing.

A sweep's bundle (``segdiff run --sweep --bundle``, a shard's or the whole set's) carries a
:class:`ShardManifest`: the set's identity (the model and every image of the set, in order),
its size, the shard, and that shard's images. ``segdiff merge`` keeps the manifests in the
cache; a sweep over merged runs measures its :class:`SetCoverage` against them: the shards no
bundle brought, and the images of the shards that came whose runs are absent.

A record is untrusted, and evidence only for runs that are present: every size in it is
bounded (core/limits.py), a set's images are counted as present only where their runs are
(:func:`images_with_runs`), and the set's identity is checked against the images its records
name wherever they name them all (a whole set's record at once, shards once every place of
the set is covered): records that disagree with it, or with one another, never make a set
whole.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from segdiff_gui.core.findings import plural
from segdiff_gui.core.hashing import canonical_json, hash_bytes
from segdiff_gui.core.limits import MAX_BATCH, MAX_NAME_CHARS, MAX_SET_IMAGES, MAX_SHARDS
from segdiff_gui.core.shards import shard_of, shard_slice

__all__ = [
    "SetCoverage",
    "ShardManifest",
    "images_with_runs",
    "manifests_of",
    "set_coverage",
    "set_identity",
]

_HEX = frozenset("0123456789abcdef")
# Shards named in a sentence before "and N more".
_SHOWN_SHARDS = 5


def set_identity(model_hash: str, image_hashes: Sequence[str]) -> str:
    """The set's identity: the model file and every image of the set, in the order shards cut
    it (a set given in another order, or with another model, is another set)."""
    return hash_bytes(canonical_json(["segdiff-test-set", model_hash, list(image_hashes)]).encode())


def _digest(value: Any, what: str) -> str:
    if not (isinstance(value, str) and len(value) == 64 and set(value) <= _HEX):
        raise ValueError(f"its {what} is not a SHA-256 digest")
    return value


def _whole(value: Any, what: str, low: int, high: int) -> int:
    if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
        raise ValueError(f"its {what} is not a whole number from {low:,} to {high:,}")
    return value


def _name(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_NAME_CHARS


@dataclass(frozen=True)
class ShardManifest:
    """What one task of a sweep was asked for: shard ``shard`` (K, N) of the set ``set_id`` of
    ``size`` images, whose images are ``images`` (name, content hash) in the set's order, and
    of whose runs those of ``missing`` (image names) were not stored (they failed)."""

    set_id: str
    model_hash: str
    size: int
    shard: tuple[int, int]
    images: tuple[tuple[str, str], ...]
    missing: tuple[str, ...] = ()
    # The runs its request planned on each image, by label (``cpu b1 r0``): shards of one set
    # run with other configurations or repeats are not one whole set.
    runs: tuple[str, ...] = ()
    # The block of images the shards were cut at (core/shards.shard_unit: the sweep's largest
    # batch, where each shard has a block of it): part of how the set was cut.
    unit: int = 1

    @property
    def indices(self) -> range:
        """The places in the set of this shard's images."""
        return shard_slice(self.size, self.shard, self.unit)

    @property
    def cut(self) -> tuple[int, int]:
        """How the set was cut: the number of shards, and the unit of images cut at."""
        return self.shard[1], self.unit

    @property
    def shard_text(self) -> str:
        return f"{self.shard[0]}/{self.shard[1]}"

    @property
    def part_text(self) -> str:
        """What of the set this is, in words: ``shard 2/4``, or the set run whole."""
        return f"shard {self.shard_text}" if self.shard[1] > 1 else "the whole test set"

    def to_dict(self) -> dict[str, Any]:
        return {
            "set": self.set_id,
            "model": self.model_hash,
            "size": self.size,
            "shard": list(self.shard),
            "images": [list(image) for image in self.images],
            "missing": list(self.missing),
            "runs": list(self.runs),
            "unit": self.unit,
        }

    @classmethod
    def from_dict(cls, value: Any) -> ShardManifest:
        """A manifest read from a file: every field checked (``ValueError`` says which is
        wrong), its images exactly its shard's slice of the set."""
        if not isinstance(value, Mapping):
            raise ValueError("it is not a test-set manifest")
        size = _whole(value.get("size"), "set size", 1, MAX_SET_IMAGES)
        shard = value.get("shard")
        if not (isinstance(shard, list) and len(shard) == 2):
            raise ValueError("its shard is not [K, N]")
        total = _whole(shard[1], "shard count N", 1, min(size, MAX_SHARDS))
        number = _whole(shard[0], "shard K", 1, total)
        unit = _whole(value.get("unit", 1), "unit of images cut at", 1, MAX_BATCH)
        if unit > 1 and -(-size // unit) < total:
            raise ValueError(f"its {total} shards cannot be cut at blocks of {unit} images")
        images = value.get("images")
        expected = len(shard_slice(size, (number, total), unit))
        if not isinstance(images, list) or len(images) != expected:
            raise ValueError(f"it does not name the {expected} images of shard {number}/{total}")
        pairs = []
        for image in images:
            if not (isinstance(image, list) and len(image) == 2 and _name(image[0])):
                raise ValueError("an image of it is not [name, digest]")
            pairs.append((image[0], _digest(image[1], "image digest")))
        missing = value.get("missing", [])
        names = {name for name, _ in pairs}
        if not isinstance(missing, list) or not all(
            isinstance(name, str) and name in names for name in missing
        ):
            raise ValueError("its missing images are not images of its shard")
        runs = value.get("runs", [])
        if not isinstance(runs, list) or not all(_name(label) for label in runs):
            raise ValueError("its runs are not a list of labels")
        manifest = cls(
            set_id=_digest(value.get("set"), "set identity"),
            model_hash=_digest(value.get("model"), "model digest"),
            size=size,
            shard=(number, total),
            images=tuple(pairs),
            missing=tuple(missing),
            runs=tuple(runs),
            unit=unit,
        )
        if total == 1 and not manifest.names_the_set([h for _, h in pairs]):
            # A whole set's record names every image: its identity is checked at once.
            raise ValueError(f"its images are not those of the set {manifest.set_id[:8]} it names")
        return manifest

    def names_the_set(self, image_hashes: Sequence[str]) -> bool:
        """Whether ``image_hashes`` (every image of the set, in order) are the set this record
        names: its identity is made of them and the model."""
        return set_identity(self.model_hash, image_hashes) == self.set_id


@dataclass(frozen=True)
class SetCoverage:
    """How much of one test set a sweep holds: ``size`` images cut into ``shards``; the
    shards no manifest came for (``missing_shards``, with their image counts), and the images
    of the shards that came whose runs are absent or incomplete (``absent``, by name)."""

    set_id: str
    size: int
    shards: int
    present: int  # the set's images the sweep summarised
    missing_shards: tuple[tuple[int, int], ...]  # (K, its image count)
    absent: tuple[str, ...]
    # Shards run without some of the runs the others have ("K/N", those labels).
    lacking: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # How the set's records disagree with the set they name or with one another ("" where
    # they agree): a record is damaged or forged, and the set is never whole by them.
    contradiction: str = ""

    @property
    def complete(self) -> bool:
        return self.present == self.size and not self.lacking and not self.contradiction

    def sentence(self) -> str:
        """One line: what of the set is missing, by shard and by image name."""
        parts = []
        if self.contradiction:
            parts.append(f"{self.contradiction} (a record is damaged or forged)")
        if self.missing_shards:
            first = self.missing_shards[:_SHOWN_SHARDS]
            named = ", ".join(f"{k}/{self.shards}" for k, _ in first)
            if len(self.missing_shards) > len(first):
                named += f" and {len(self.missing_shards) - len(first):,} more"
            count = sum(n for _, n in self.missing_shards)
            noun = "shard" if len(self.missing_shards) == 1 else "shards"
            parts.append(f"{noun} {named} ({plural(count, 'image')}) missing")
        if self.absent:
            shown = ", ".join(self.absent[:5])
            more = f" and {len(self.absent) - 5} more" if len(self.absent) > 5 else ""
            among = " of the shards present" if self.sharded else ""
            parts.append(f"{plural(len(self.absent), 'image')}{among} without runs "
                         f"({shown}{more})")  # fmt: skip
        for shard, labels in self.lacking:
            more = f" and {len(labels) - 3} more" if len(labels) > 3 else ""
            parts.append(f"shard {shard} was run without {', '.join(labels[:3])}{more}")
        return (
            f"Incomplete test set: {self.present:,} of {plural(self.size, 'image')} "
            f"({self._named()}); {'; '.join(parts)}."
        )

    def merged_sentence(self) -> str:
        """One line for a set whose every shard is merged (a set run whole: every image)."""
        images = plural(self.size, "image")
        merged = (
            f"all {self.shards} shards merged ({images})"
            if self.sharded
            else f"all {images} merged"
        )
        return f"test set {self.set_id[:8]}: {merged}"

    @property
    def sharded(self) -> bool:
        """Whether the set was cut into shards (a sweep run whole is one, said in no shard's
        terms)."""
        return self.shards > 1

    def _named(self) -> str:
        return (
            f"set {self.set_id[:8]}, {self.shards} shards"
            if self.sharded
            else f"set {self.set_id[:8]}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "set": self.set_id,
            "size": self.size,
            "shards": self.shards,
            "present": self.present,
            "missing_shards": [k for k, _ in self.missing_shards],
            "absent": list(self.absent),
            "lacking": {shard: list(labels) for shard, labels in self.lacking},
            "contradiction": self.contradiction,
        }


def set_coverage(
    manifests: Iterable[ShardManifest], model_hash: str, summarised: Iterable[str]
) -> list[SetCoverage]:
    """The coverage of every set of ``model_hash`` that the summarised images (content hashes
    of the images whose runs are present) belong to, by the manifests that came for it.
    Shards of another N count by the images they cover; the missing shards are named in the
    N that needs the fewest, each with the images of it no manifest covers. Images of a shard
    never merged are not known to be the set's, even where their runs were swept (a sweep run
    here records its own manifest). Its records are checked against one another and, where
    they name every image, against the set's identity."""
    done = set(summarised)
    by_set: dict[str, list[ShardManifest]] = {}
    for manifest in manifests:
        if manifest.model_hash == model_hash:
            by_set.setdefault(manifest.set_id, []).append(manifest)
    found = []
    for set_id, chosen in sorted(by_set.items()):
        if not any(image_hash in done for m in chosen for _, image_hash in m.images):
            continue  # another set of this model: not what was swept
        found.append(_coverage(set_id, chosen, done))
    return found


def _coverage(set_id: str, chosen: list[ShardManifest], done: set[str]) -> SetCoverage:
    """One set's coverage by its records ``chosen``, counted from the images in ``done``."""
    sizes = sorted({m.size for m in chosen})
    # Records that disagree on the size cannot all be right: the size most of them give.
    size = max(sizes, key=lambda n: (sum(m.size == n for m in chosen), n))
    chosen = [m for m in chosen if m.size == size]
    contradiction = ""
    if len(sizes) > 1:
        contradiction = f"its records give it {len(sizes)} sizes ({', '.join(map(str, sizes))})"
    covered: dict[int, tuple[str, str]] = {}
    placed: dict[int, ShardManifest] = {}
    for manifest in chosen:
        for index, image in zip(manifest.indices, manifest.images, strict=True):
            if index in covered and covered[index][1] != image[1] and not contradiction:
                contradiction = (
                    f"the records of shards {placed[index].shard_text} and "
                    f"{manifest.shard_text} name other images in the same place"
                )
            covered[index], placed[index] = image, manifest
    whole = len(covered) == size and not contradiction
    if whole and not chosen[0].names_the_set([covered[index][1] for index in range(size)]):
        contradiction = "the images its records name are not the set's"
    gaps = _uncovered(size, [m.indices for m in chosen])
    shards_with_gaps = {cut: _shards_meeting(size, cut, gaps) for cut in {m.cut for m in chosen}}
    # The missing images named in the shards of one cut: the N that names them in the fewest
    # shards (shards of an N partly covered by another N count their own gaps).
    cut = min(shards_with_gaps, key=lambda c: (_count(shards_with_gaps[c]), c))
    total = cut[0]
    missing_shards = _missing_shards(size, cut, shards_with_gaps[cut], gaps)
    absent = tuple(name for _, (name, image_hash) in sorted(covered.items())
                   if image_hash not in done)  # fmt: skip
    if contradiction:  # what the records name is not to be trusted: each image counts once
        present = len({image_hash for _, image_hash in covered.values()} & done)
    else:
        present = sum(image_hash in done for _, image_hash in covered.values())
    everything = {label for manifest in chosen for label in manifest.runs}
    lacking = tuple(
        (manifest.shard_text, tuple(sorted(everything - set(manifest.runs))))
        for manifest in sorted(chosen, key=lambda m: (m.shard[1], m.shard[0]))
        if everything - set(manifest.runs)
    )
    return SetCoverage(set_id, size, total, present, missing_shards, absent, lacking, contradiction)


def _uncovered(size: int, slices: Iterable[range]) -> list[range]:
    """The places of a set of ``size`` that none of ``slices`` covers, as ranges in order."""
    gaps, start = [], 0
    for covered in sorted(slices, key=lambda r: r.start):
        if covered.start > start:
            gaps.append(range(start, covered.start))
        start = max(start, covered.stop)
    if start < size:
        gaps.append(range(start, size))
    return gaps


def _shards_meeting(size: int, cut: tuple[int, int], gaps: list[range]) -> list[range]:
    """The shards K of a ``cut`` (N, unit) that hold a place of ``gaps``, as ranges of K in
    order: counted from the gaps, never shard by shard (a record may claim 100,000 shards)."""
    total, unit = cut
    runs: list[range] = []
    for gap in gaps:
        first = shard_of(size, total, gap.start, unit)
        last = shard_of(size, total, gap.stop - 1, unit)
        if runs and first <= runs[-1].stop:
            runs[-1] = range(runs[-1].start, max(runs[-1].stop, last + 1))
        else:
            runs.append(range(first, last + 1))
    return runs


def _count(ranges: list[range]) -> int:
    return sum(len(r) for r in ranges)


def _missing_shards(
    size: int, cut: tuple[int, int], shards: list[range], gaps: list[range]
) -> tuple[tuple[int, int], ...]:
    """Each shard K of ``shards`` (of a ``cut``: N, unit) with the count of its places in
    ``gaps``."""
    total, unit = cut
    missing = []
    at = 0
    for shard in (k for run in shards for k in run):
        places = shard_slice(size, (shard, total), unit)
        while gaps[at].stop <= places.start:
            at += 1
        count, look = 0, at
        while look < len(gaps) and gaps[look].start < places.stop:
            count += len(range(max(places.start, gaps[look].start),
                               min(places.stop, gaps[look].stop)))  # fmt: skip
            look += 1
        missing.append((shard, count))
    return tuple(missing)


def images_with_runs(
    manifests: Iterable[ShardManifest], runs: Collection[tuple[str, str, str]]
) -> set[str]:
    """The images of ``manifests`` (content hashes) whose runs are present: every run its
    record says its request planned (by label), among ``runs`` (model hash, image hash,
    label). What a record claims of its own runs is never taken for them."""
    labels: dict[tuple[str, str], set[str]] = {}
    for model_hash, image_hash, label in runs:
        labels.setdefault((model_hash, image_hash), set()).add(label)
    found = set()
    for manifest in manifests:
        for _, image_hash in manifest.images:
            held = labels.get((manifest.model_hash, image_hash), set())
            if held and held >= set(manifest.runs):
                found.add(image_hash)
    return found


def manifests_of(
    manifests: Iterable[ShardManifest], runs: Iterable[tuple[str, str]]
) -> list[ShardManifest]:
    """The manifests of the sets that runs (model hash, image hash) belong to: what a bundle of
    them carries on, so that the set's shards are still counted wherever it is merged."""
    wanted = set(runs)
    return [
        manifest
        for manifest in manifests
        if any((manifest.model_hash, image_hash) in wanted for _, image_hash in manifest.images)
    ]
