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

import contextlib
import decimal
import math
import numbers
import warnings
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from dpflow.errors import DataError

_RESERVED = frozenset({"", "nan", "None", "<NA>", "NaT", "<other>"})
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
    if len({_label(v) for v in out}) != len(out):  # 1 and "1" are one category
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
        """The index of each value in the category list, -1 when it is not there (unseen or missing).

        A value is a text category when its text is that category (a number's text is its shortest form:
        ``1.0`` is ``"1"``); else it is a numeric category when it is that number (:func:`_as_float`: numbers
        of any type, numeric text such as ``"1"``).  Never raises on a value.

        >>> Category("g", [1, 2], encoding="codes").codes(np.array([2.0, "1", np.int8(1), 1.5, None], dtype=object))
        array([ 1,  0,  0, -1, -1])
        """
        vals = np.asarray(values).reshape(-1)
        out = np.full(vals.shape[0], -1, dtype=np.int64)
        text = {c: i for i, c in enumerate(self.categories) if isinstance(c, str)}
        nums = [(c, i) for i, c in enumerate(self.categories) if isinstance(c, float)]
        numeric = vals.dtype.kind in tuple("biuf")
        if text and vals.size:  # text compared on the distinct values only
            with _quiet():
                keys = vals.astype(float) if numeric else vals if vals.dtype.kind == "U" else _TEXT(vals.astype(object))
            uniq, inverse = np.unique(np.asarray(keys, dtype=float if numeric else str), return_inverse=True)
            labels = [_label(float(u)) if math.isfinite(u) else "" for u in uniq] if numeric else uniq.tolist()
            out = np.array([text.get(str(u), -1) for u in labels], dtype=np.int64)[inverse.reshape(-1)]
        if nums and vals.size:
            cats = np.array([c for c, _ in nums])
            index = np.array([i for _, i in nums], dtype=np.int64)
            order = np.argsort(cats)
            with _quiet():
                x = vals.astype(float) if numeric else _values_as_floats(vals)
            pos = np.clip(np.searchsorted(cats[order], x), 0, len(nums) - 1)
            hit = np.where(cats[order][pos] == x, index[order][pos], -1)
            out = np.where(out < 0, hit, out)
        return out

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


def _text(v: Any) -> str:
    """The text a value is matched by against text categories (never raises): text is itself (bytes as
    UTF-8), a bool ``"True"`` or ``"False"``, a finite number its shortest form (:func:`_label`), anything
    else (missing, non-finite, not a number) ``""``, which no category is."""
    if type(v) is str:  # the common case, first
        return v
    try:
        if isinstance(v, str):
            return str.__str__(v)
        if isinstance(v, bytes):
            return bytes.decode(v, "utf-8", "replace")
        if isinstance(v, (bool, np.bool_)):
            return str(bool(v))
    except Exception:
        return ""
    x = _as_float(v)
    return _label(x) if math.isfinite(x) else ""


_TEXT = np.frompyfunc(_text, 1, 1)


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
    """One value as a float by the declared policy; it never raises (nor depends on how a conversion fails).

    A real number is itself: an integer or ``Fraction`` beyond the float range is +-inf (then the source's
    non-finite policy), a bool is 0 or 1, a ``Decimal`` converts (its NaN and sNaN are missing).  Text
    (``str``, ``bytes``) is a number when ``float()`` reads it, spaces around it allowed (``" 80"`` is 80,
    ``"1e400"`` is inf).  Anything else is missing (NaN): text that is not a number, None, pandas.NA,
    complex numbers, dates and durations, and objects whose conversion fails.

    >>> [_as_float(v) for v in (10**400, -(10**400), " 80", "n/a", True, None, 1j)]
    [inf, -inf, 80.0, nan, 1.0, nan, nan]
    """
    try:
        if isinstance(v, float):  # the common case first (numpy's float64 too)
            return float(v)
        if isinstance(v, (str, bytes)):
            return float(v)
        if isinstance(v, (bool, np.bool_)):
            return float(bool(v))
        if isinstance(v, (np.datetime64, np.timedelta64)) or not isinstance(v, (numbers.Real, decimal.Decimal)):
            return math.nan
        try:
            return float(v)
        except OverflowError:  # an int or Fraction beyond the float range
            return math.inf if v > 0 else -math.inf  # type: ignore[operator]
    except Exception:  # text that is not a number, a signalling NaN, a failing or lying __float__
        return math.nan


_AS_FLOAT = np.frompyfunc(_as_float, 1, 1)


def _quiet() -> contextlib.ExitStack:
    """A context in which converting values neither warns nor raises on them (numpy's overflow in a cast,
    a ``__float__`` returning a float subclass): the same on every dataset, whatever the warning filters."""
    stack = contextlib.ExitStack()
    stack.enter_context(np.errstate(all="ignore"))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


def _values_as_floats(values: Any) -> np.ndarray:
    """Values of any kind (an object column) as floats, value by value (:func:`_as_float`)."""
    with _quiet():
        return np.asarray(_AS_FLOAT(np.asarray(values, dtype=object)), dtype=float)


def _numeric(col: Any) -> np.ndarray:
    """A column as floats, missing values as NaN; it never raises.

    Numeric dtypes (numpy, pandas nullable, Arrow) convert, pandas.NA becoming NaN; any other dtype converts
    value by value (:func:`_as_float`): numbers held as objects, numbers read as text by a CSV reader,
    ``Decimal``; a value that is not a real number counts as missing (NaN, then each node's non-finite
    policy), so a column of dates or complex numbers is all missing.  No dtype is refused: pandas and numpy
    infer a dtype from the values (``pd.Series([1j, 2])`` is complex, ``pd.Series([1j, "a"])`` object), so
    a refusal would depend on them.
    """
    dtype = getattr(col, "dtype", None) if hasattr(col, "to_numpy") else np.asarray(col).dtype
    if getattr(dtype, "kind", "") in tuple("biuf"):
        with _quiet():
            if hasattr(col, "to_numpy"):  # numpy and pandas nullable numeric dtypes (pandas.NA becomes NaN)
                arr: np.ndarray = np.asarray(col.to_numpy(dtype=float, na_value=np.nan))
                return arr
            return np.asarray(col, dtype=float)
    return _values_as_floats(col.to_numpy(dtype=object) if hasattr(col, "to_numpy") else col)


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
    is a public schema error), or, with no declaration, all its columns.  A Series is one column.  An array
    with declared columns must have one raw column per declared column; categorical ones are encoded.  Numeric
    columns follow :func:`_numeric` (never raising).  Without declared columns a list or a numpy array of
    any dtype but a numeric one converts value by value too; anything else is returned as given
    (``np.asarray`` comes later).  Only public facts raise: names and shapes.  Usable on one block of rows
    at a time (a partition of a table).

    >>> import numpy as np
    >>> to_rows(np.array([[1.0, 0.0], [2.0, 1.0]]), ["x", Category("g", [0, 1], unseen="none")], "X").tolist()
    [[1.0, 1.0, 0.0], [2.0, 0.0, 1.0]]
    """
    if columns is None:
        if is_frame(raw):
            return np.column_stack([_numeric(raw[c]) for c in raw.columns]) \
                if len(raw.columns) else np.zeros((len(raw), 0))
        if is_series(raw):
            return _numeric(raw).reshape(-1, 1)
        arr = np.asarray(raw) if isinstance(raw, (list, tuple)) else raw
        if isinstance(arr, np.ndarray) and arr.dtype.kind not in "biuf":  # np.asarray([1, 10**400]): objects
            return _values_as_floats(arr)
        return arr
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
            out.append(_numeric(col).reshape(-1, 1))
    return np.hstack(out)
