"""Tables as sources: pandas DataFrames and Series (and anything with ``__array__``), named columns and
categorical columns encoded through a *public* category list.

This is the one module that turns what a user passes into the numeric rows a :class:`dpflow.nodes.Source`
checks.  It imports pandas nowhere: a DataFrame is recognised by its ``columns`` and ``to_numpy``, so
dpflow runs without pandas and reads DataFrames when the user has them (the optional ``pandas`` extra).

Only public information shapes the output: the declared column names and category lists fix the width
and the meaning of every coordinate; the values never raise.  A value outside a column's category list
(unseen, or missing: NaN, None, pandas.NA) follows the :class:`Category`'s declared ``unseen`` policy.

>>> import numpy as np
>>> sex = Category("sex", ["F", "M"])
>>> sex.names()
('sex=F', 'sex=M', 'sex=<other>')
>>> sex.encode(np.array(["M", "F", None, "X"], dtype=object)).tolist()
[[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from dpflow.errors import DataError

_RESERVED = frozenset({"nan", "None", "<NA>", "NaT", "<other>"})
"""String forms of missing values (and the name of the extra category): no category may be called so."""


def _categories(values: Any) -> tuple[str | float, ...]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError("a Category needs a list of its public categories, e.g. Category('sex', ['F', 'M'])")
    out: list[str | float] = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (str, numbers.Real)):
            raise ValueError(f"categories are strings or numbers, got {v!r}")
        if isinstance(v, str):
            if v in _RESERVED:
                raise ValueError(f"{v!r} cannot be a category: it is how a missing value prints")
            out.append(v)
        else:
            if not math.isfinite(float(v)):
                raise ValueError(f"a numeric category must be finite, got {v!r}")
            out.append(float(v))
    if not out:
        raise ValueError("a Category needs at least one category")
    if len({str(v) for v in out}) != len(out):
        raise ValueError(f"categories must be distinct, got {out}")
    return tuple(out)


@attrs.frozen
class Category:
    """A categorical column and its public list of categories.

    ``encoding="onehot"`` gives one 0/1 coordinate per category; ``"codes"`` one coordinate holding the
    category's index.  ``unseen`` is the declared policy for a value not in the list, missing values
    included: ``"other"`` (default) adds one more category, ``<other>`` (its own one-hot coordinate, or
    the code ``len(categories)``); ``"none"`` gives an all-zero one-hot row or the code NaN (which then
    follows each later node's non-finite policy).  The list must be public: taking it from the data
    would release which values occur.

    >>> Category("grade", [1, 2, 3], encoding="codes", unseen="none").encode(np.array([3.0, 7.0])).tolist()
    [[2.0], [nan]]
    """

    name: str
    categories: tuple[str | float, ...] = attrs.field(converter=_categories)
    encoding: str = "onehot"
    unseen: str = "other"

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a Category needs a column name, got {self.name!r}")
        if self.encoding not in ("onehot", "codes"):
            raise ValueError(f"Category encoding must be 'onehot' or 'codes', got {self.encoding!r}")
        if self.unseen not in ("other", "none"):
            raise ValueError(f"Category unseen must be 'other' or 'none', got {self.unseen!r}")

    @property
    def width(self) -> int:
        """How many coordinates the column becomes."""
        if self.encoding == "codes":
            return 1
        return len(self.categories) + (1 if self.unseen == "other" else 0)

    def names(self) -> tuple[str, ...]:
        """The names of the coordinates it becomes (``name=category`` for one-hot)."""
        if self.encoding == "codes":
            return (self.name,)
        extra = ("<other>",) if self.unseen == "other" else ()
        return tuple(f"{self.name}={_label(c)}" for c in (*self.categories, *extra))

    def codes(self, values: np.ndarray) -> np.ndarray:
        """The index of each value in the category list, -1 when it is not there (unseen or missing)."""
        vals = np.asarray(values).reshape(-1)
        k = len(self.categories)
        if vals.dtype.kind in "biuf" and all(isinstance(c, float) for c in self.categories):
            cats = np.asarray(self.categories, dtype=float)
            order = np.argsort(cats)
            x = vals.astype(float)
            pos = np.clip(np.searchsorted(cats[order], x), 0, k - 1)
            return np.where(cats[order][pos] == x, order[pos], -1).astype(np.int64)
        # strings, objects, mixed: compare the printed forms (missing values print as reserved names)
        uniq, inverse = np.unique(vals.astype(str), return_inverse=True)
        index = {_label(c): i for i, c in enumerate(self.categories)}
        mapped = np.array([index.get(str(u), -1) for u in uniq], dtype=np.int64)  # one entry per distinct value
        return mapped[inverse.reshape(-1)] if len(uniq) else np.zeros(0, dtype=np.int64)

    def encode(self, values: np.ndarray) -> np.ndarray:
        """The ``(n, width)`` float encoding of one column of raw values."""
        c = self.codes(values)
        k = len(self.categories)
        if self.encoding == "codes":
            if self.unseen == "other":
                return np.where(c < 0, k, c).astype(float).reshape(-1, 1)
            return np.where(c < 0, np.nan, c.astype(float)).reshape(-1, 1)
        out = np.zeros((c.shape[0], self.width))
        rows = np.arange(c.shape[0])
        target = np.where(c < 0, k, c)
        keep = target < self.width  # unseen="none": no coordinate for unseen values
        out[rows[keep], target[keep]] = 1.0
        return out


def _label(c: str | float) -> str:
    if isinstance(c, float) and c.is_integer():
        return str(int(c))
    return str(c)


Column = str | Category
"""A declared source column: a numeric column's name, or a :class:`Category`."""


def column_param(cols: Any) -> tuple[Column, ...] | None:
    """Check a source's ``columns`` declaration (distinct names; strings or Categories)."""
    if cols is None:
        return None
    if isinstance(cols, (str, Category)):
        cols = [cols]
    out = tuple(cols)
    for c in out:
        if not isinstance(c, (str, Category)) or (isinstance(c, str) and not c):
            raise ValueError(f"a column is a name or a dpflow.Category, got {c!r}")
    raw = [c.name if isinstance(c, Category) else c for c in out]
    if not out or len(set(raw)) != len(raw):
        raise ValueError(f"columns must be a non-empty list of distinct names, got {raw}")
    return out


def encoded_names(cols: Sequence[Column]) -> tuple[str, ...]:
    """The names of the coordinates the declared columns become, in order.

    >>> encoded_names(["age", Category("sex", ["F", "M"], unseen="none")])
    ('age', 'sex=F', 'sex=M')
    """
    out: list[str] = []
    for c in cols:
        out.extend(c.names() if isinstance(c, Category) else (c,))
    return tuple(out)


def is_frame(raw: Any) -> bool:
    """True for a pandas DataFrame (or anything shaped like one: ``columns`` and ``to_numpy``)."""
    return hasattr(raw, "columns") and hasattr(raw, "to_numpy") and hasattr(raw, "__getitem__")


def is_series(raw: Any) -> bool:
    """True for a pandas Series (``to_numpy``, ``name``, one dimension)."""
    return hasattr(raw, "to_numpy") and hasattr(raw, "name") and getattr(raw, "ndim", 0) == 1


def _as_float(v: Any) -> float:
    """One value of an object column as a float: a number (a bool is 0 or 1), else NaN (declared policy)."""
    if isinstance(v, (numbers.Real, np.bool_)):
        return float(v)
    return math.nan


_AS_FLOAT = np.frompyfunc(_as_float, 1, 1)


def _numeric(col: Any, where: str, what: str) -> np.ndarray:
    """A column as floats, missing values as NaN.

    Decided by the dtype (public schema), never by the values: numeric dtypes (numpy, pandas nullable)
    convert; a numpy object column (numbers held as objects, e.g. a mixed table) converts value by value,
    anything that is not a number counting as missing (NaN, then each node's non-finite policy); a text or
    categorical dtype is a schema error whose fix is to declare the column as a :class:`Category`.
    """
    dtype = getattr(col, "dtype", None) if hasattr(col, "to_numpy") else np.asarray(col).dtype
    kind = getattr(dtype, "kind", "")
    if kind in tuple("biuf"):
        if hasattr(col, "to_numpy"):  # numpy and pandas nullable numeric dtypes (pandas.NA becomes NaN)
            arr: np.ndarray = np.asarray(col.to_numpy(dtype=float, na_value=np.nan))
            return arr
        return np.asarray(col, dtype=float)
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        raw = np.asarray(col.to_numpy() if hasattr(col, "to_numpy") else col, dtype=object)
        return np.asarray(_AS_FLOAT(raw), dtype=float)
    raise DataError(where, f"{what} is not numeric (dtype {dtype})",
                    f"declare it as dpflow.Category({what.split()[-1]}, [...categories...]) in the source's "
                    "columns, or convert it to numbers")


def check_array_columns(shape: tuple[int, ...], columns: Sequence[Column], where: str) -> None:
    """An array (of this ``shape``, 1-D as one column) with declared columns has one raw column per declared
    column: a public schema check, which reads no value.

    >>> check_array_columns((10, 1), ["x", "y"], "X")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    dpflow.errors.DataError: X: the source declares 2 columns ['x', 'y'], got an array of shape (10, 1)...
    """
    names = [c.name if isinstance(c, Category) else c for c in columns]
    shape = (shape[0], 1) if len(shape) == 1 else shape
    if len(shape) != 2 or shape[1] != len(names):
        raise DataError(where, f"the source declares {len(names)} columns {names}, got an array of shape "
                        f"{shape}", f"pass an (n, {len(names)}) array or a DataFrame with those columns")


def to_rows(raw: Any, columns: Sequence[Column] | None, where: str) -> Any:
    """What ``raw`` holds as rows for a source, before the source's own checks.

    A DataFrame gives its declared ``columns`` in the declared order (others are ignored; a missing one
    is a public schema error), or, with no declaration, all its columns (each must be numeric).  A Series
    is one column.  An array with declared columns must have one raw column per declared column;
    categorical ones are encoded.  Anything else is returned as given (``np.asarray`` comes later).

    >>> import numpy as np
    >>> to_rows(np.array([[1.0, 0.0], [2.0, 1.0]]), ["x", Category("g", [0, 1], unseen="none")], "X").tolist()
    [[1.0, 1.0, 0.0], [2.0, 0.0, 1.0]]
    """
    if columns is None:
        if is_frame(raw):
            return np.column_stack([_numeric(raw[c], where, f"column {c!r}") for c in raw.columns]) \
                if len(raw.columns) else np.zeros((len(raw), 0))
        if is_series(raw):
            return _numeric(raw, where, f"column {raw.name!r}").reshape(-1, 1)
        return raw
    names = [c.name if isinstance(c, Category) else c for c in columns]
    if is_frame(raw):
        have = {str(c): c for c in raw.columns}
        missing = [c for c in names if c not in have]
        if missing:
            raise DataError(where, f"the DataFrame has no column(s) {missing} (it has {list(have)[:20]})",
                            "pass a DataFrame with the declared columns, or change the source's columns")
        parts = [raw[have[c]] for c in names]
    elif is_series(raw):
        if len(names) != 1:
            raise DataError(where, f"a Series is one column, but the source declares {len(names)}: {names}",
                            "pass a DataFrame")
        parts = [raw]
    else:
        arr = np.asarray(raw)
        arr = arr.reshape(-1, 1) if arr.ndim == 1 else arr
        check_array_columns(arr.shape, columns, where)
        parts = [arr[:, j] for j in range(arr.shape[1])]
    out = []
    for spec, col in zip(columns, parts, strict=True):
        if isinstance(spec, Category):
            vals = col.to_numpy() if hasattr(col, "to_numpy") else np.asarray(col)
            out.append(spec.encode(np.asarray(vals)))
        else:
            out.append(_numeric(col, where, f"column {spec!r}").reshape(-1, 1))
    return np.hstack(out)
