"""XGBoost regression forests evaluated with numpy: the predict path never imports xgboost.

Why: ``import xgboost`` costs 0.35 s on its own and 0.85 s with the scikit-learn it pulls in
(``xgboost.compat``), more than half of the 1.5 s a cold ``llmp predict`` may take. A fitted
residual group is a plain sum of small regression trees, so the predict path reads the model
file XGBoost wrote (``Booster.save_raw("ubj")`` / ``save_model(*.ubj)``: Universal Binary JSON,
https://ubjson.org) and walks the trees itself. xgboost is still what fits the trees, and what
``adapt.continue_boosting`` resumes from (:meth:`Forest.to_xgboost`).

Semantics follow XGBoost's CPU predictor for numeric splits (``src/predictor/predict_fn.h``,
``GetNextNode``): at a split node go left when ``x < threshold`` in float32, to the node's
default side when ``x`` is missing (NaN); the prediction is ``base_score`` plus the sum of the
leaves reached (a leaf's value is stored in its ``split_conditions`` slot). Only what
``ResidualModel`` writes is accepted (objective ``reg:squarederror``, booster ``gbtree``, one
target, numeric splits); anything else is refused with :class:`ResidualSchemaError`, never
guessed. A test checks the predictions equal ``Booster.inplace_predict`` on random inputs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.errors import ResidualSchemaError

_SCALARS = {b"i": ">b", b"U": ">B", b"I": ">h", b"l": ">i", b"L": ">q", b"d": ">f", b"D": ">d"}
"""UBJSON numeric markers -> big-endian ``struct`` formats (numpy reads the same strings)."""
_INTEGERS = {ord(m): struct.Struct(f) for m, f in _SCALARS.items() if m not in (b"d", b"D")}
_CONSTANTS = {b"T": True, b"F": False, b"Z": None}


class _Reader:
    """A strict Universal Binary JSON decoder (the subset XGBoost writes, plus the plain forms)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _byte(self) -> int:
        if self.pos >= len(self.data):
            raise ValueError("the file ends in the middle of a value")
        self.pos += 1
        return self.data[self.pos - 1]

    def _marker(self) -> bytes:
        marker = self._byte()
        while marker == 0x4E:  # 'N': no-op padding
            marker = self._byte()
        return bytes((marker,))

    def _scalar(self, marker: bytes) -> Any:
        fmt = _SCALARS[marker]
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError("the file ends in the middle of a value")
        value = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += size
        return value

    def _count(self) -> int:
        """A length: an integer marker and value (XGBoost writes int64 'L')."""
        reader = _INTEGERS.get(self._byte())
        if reader is None:
            raise ValueError(f"expected an integer length at byte {self.pos - 1}")
        if self.pos + reader.size > len(self.data):
            raise ValueError("the file ends in the middle of a length")
        n = reader.unpack_from(self.data, self.pos)[0]
        self.pos += reader.size
        if n < 0 or n > len(self.data):
            raise ValueError(f"length {n} out of range")
        return n

    def _string(self) -> str:
        n = self._count()
        if self.pos + n > len(self.data):
            raise ValueError("the file ends in the middle of a string")
        self.pos += n
        return self.data[self.pos - n:self.pos].decode("utf-8")

    def value(self, marker: bytes | None = None) -> Any:
        marker = self._marker() if marker is None else marker
        if marker in _SCALARS:
            return self._scalar(marker)
        if marker == b"S":
            return self._string()
        if marker == b"[":
            return self._array()
        if marker == b"{":
            return self._object()
        if marker in _CONSTANTS:
            return _CONSTANTS[marker]
        raise ValueError(f"unknown marker {marker!r} at byte {self.pos - 1}")

    def _peek(self, char: int) -> bool:
        if self.pos < len(self.data) and self.data[self.pos] == char:
            self.pos += 1
            return True
        return False

    def _container_header(self) -> tuple[bytes | None, int | None]:
        if self._peek(0x24):  # '$': typed container, a count must follow
            kind = self._marker()
            if not self._peek(0x23):
                raise ValueError("a typed container needs a count")
            return kind, self._count()
        if self._peek(0x23):  # '#': counted container
            return None, self._count()
        return None, None

    def _array(self) -> Any:
        kind, count = self._container_header()
        if kind in _SCALARS and count is not None:  # typed numeric array: one numpy read
            dtype = np.dtype(_SCALARS[kind])
            end = self.pos + count * dtype.itemsize
            if end > len(self.data):
                raise ValueError("the file ends in the middle of an array")
            out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos)
            self.pos = end
            return out
        if count is not None:
            return [self.value(kind) for _ in range(count)]
        items = []
        while (marker := self._marker()) != b"]":
            items.append(self.value(marker))
        return items

    def _object(self) -> dict[str, Any]:
        kind, count = self._container_header()
        if count is not None:
            return {self._string(): self.value(kind) for _ in range(count)}
        out: dict[str, Any] = {}
        while not self._peek(0x7D):  # '}'
            key = self._string()
            out[key] = self.value()
        return out


def read_ubj(data: bytes) -> Any:
    """Decode one Universal Binary JSON document (``ValueError`` on malformed or trailing bytes)."""
    reader = _Reader(data)
    try:
        doc = reader.value()
    except (struct.error, KeyError, UnicodeDecodeError, RecursionError) as err:
        raise ValueError(f"malformed UBJSON ({type(err).__name__})") from None
    if reader.pos != len(reader.data):
        raise ValueError(f"{len(reader.data) - reader.pos} bytes after the end of the document")
    return doc


@dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class Forest:
    """A fitted XGBoost regression forest as flat numpy arrays (all trees' nodes end to end)."""

    base_score: float
    n_features: int
    roots: np.ndarray
    """Index of each tree's root node in the flat arrays."""
    feature: np.ndarray
    threshold: np.ndarray
    """float32, as XGBoost compares."""
    left: np.ndarray
    """Next node when going left; a leaf points to itself."""
    right: np.ndarray
    default_left: np.ndarray
    value: np.ndarray
    """Leaf values (0 at split nodes)."""
    depth: int
    """Longest root-to-leaf path (the number of steps every row takes)."""
    raw: bytes
    """The model file's bytes (written back unchanged by ``saving.save``)."""
    version: str
    """The XGBoost version that wrote the model."""

    @classmethod
    def from_bytes(cls, raw: bytes) -> Forest:
        """Parse a model saved by XGBoost as UBJ; ``ResidualSchemaError`` if it is not one we can evaluate."""
        try:
            doc = read_ubj(raw)
            return cls._from_doc(doc, bytes(raw))
        except (ValueError, KeyError, TypeError, IndexError) as err:
            raise ResidualSchemaError(f"not an XGBoost regression forest llmp can read: {err}") from None

    @classmethod
    def _from_doc(cls, doc: dict[str, Any], raw: bytes) -> Forest:
        learner = doc["learner"]
        objective = learner["objective"]["name"]
        if objective != "reg:squarederror":
            raise ValueError(f"objective {objective!r} (llmp fits reg:squarederror)")
        booster = learner["gradient_booster"]
        if booster["name"] != "gbtree":
            raise ValueError(f"booster {booster['name']!r} (llmp fits gbtree)")
        param = learner["learner_model_param"]
        if int(param.get("num_target", "1")) != 1 or int(param.get("num_class", "0")) != 0:
            raise ValueError("more than one output")
        base_score = float(str(param["base_score"]).strip("[]"))
        n_features = int(param["num_feature"])
        trees = booster["model"]["trees"]
        if not isinstance(trees, list) or not trees:
            raise ValueError("no trees")
        sizes = np.asarray([len(t["left_children"]) for t in trees], dtype=np.int64)
        if np.any(sizes == 0):
            raise ValueError("an empty tree")
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])

        def flat(name: str, dtype: Any) -> np.ndarray:
            parts = [np.asarray(t[name], dtype=dtype) for t in trees]
            if any(len(p) != n for p, n in zip(parts, sizes)):
                raise ValueError(f"tree arrays of unequal length ({name})")
            return np.concatenate(parts)

        shift = np.repeat(offsets, sizes)
        lc, rc = flat("left_children", np.int64), flat("right_children", np.int64)
        fi, cond = flat("split_indices", np.int64), flat("split_conditions", np.float32)
        dl = flat("default_left", np.int64).astype(bool)
        if any(np.any(np.asarray(t.get("split_type", ())) != 0) for t in trees):
            raise ValueError("categorical splits")
        leaf = lc < 0
        size = np.repeat(sizes, sizes)
        if np.any(rc[leaf] >= 0) or np.any((lc[~leaf] >= size[~leaf]) | (rc[~leaf] >= size[~leaf]) | (rc[~leaf] < 0)):
            raise ValueError("child index out of range")
        if np.any((fi[~leaf] < 0) | (fi[~leaf] >= n_features)) or not np.all(np.isfinite(cond)):
            raise ValueError("split on a feature out of range, or a non-finite threshold")
        own = np.arange(len(lc))
        left, right = np.where(leaf, own, lc + shift), np.where(leaf, own, rc + shift)
        version = doc.get("version", [])
        return cls(base_score=base_score, n_features=n_features, roots=offsets, feature=np.where(leaf, 0, fi),
                   threshold=cond, left=left, right=right, default_left=dl,
                   value=np.where(leaf, cond.astype(np.float64), 0.0), depth=_depth(offsets, left, right, leaf),
                   raw=raw,
                   version=".".join(str(int(v)) for v in version) if len(version) else "unknown")

    @classmethod
    def of(cls, regressor: Any) -> Forest:
        """The forest of a freshly fitted ``xgboost.XGBRegressor``."""
        return cls.from_bytes(bytes(regressor.get_booster().save_raw("ubj")))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """One prediction per row of ``X`` (n_rows, n_features); NaN means missing."""
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"expected {self.n_features} feature columns, got shape {X.shape}")
        rows = np.arange(len(X))[None, :]
        node = np.broadcast_to(self.roots[:, None], (len(self.roots), len(X)))
        for _ in range(self.depth):
            x = X[rows, self.feature[node]]
            go_left = np.where(np.isnan(x), self.default_left[node], x < self.threshold[node])
            node = np.where(go_left, self.left[node], self.right[node])
        return self.base_score + self.value[node].sum(axis=0)

    def to_xgboost(self) -> Any:
        """An ``xgboost.XGBRegressor`` holding this forest (to continue boosting from it)."""
        import xgboost

        reg = xgboost.XGBRegressor()
        reg.load_model(bytearray(self.raw))
        return reg


def _depth(roots: np.ndarray, left: np.ndarray, right: np.ndarray, leaf: np.ndarray) -> int:
    """Longest root-to-leaf path over all trees; raises unless the nodes form trees."""
    frontier, depth = roots, 0
    while len(inner := frontier[~leaf[frontier]]):
        frontier = np.concatenate([left[inner], right[inner]])
        depth += 1
        if len(frontier) > len(leaf) or depth > len(leaf):
            raise ValueError("the nodes do not form trees")
    return depth
