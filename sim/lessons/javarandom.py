"""A bit-exact port of Java's ``java.util.Random``.

The generator is the 48-bit linear congruential generator documented in the
Java SE API (class ``java.util.Random``; also Knuth, TAOCP vol. 2, 3.2.1):

    seed <- (seed * 0x5DEECE66D + 0xB) mod 2**48

with the user's seed scrambled by XOR with the multiplier.  Porting it lets the
simulator reproduce, digit for digit, lesson examples whose Java programs draw
random numbers (``new Random(11).nextDouble()`` in the Little's-law example).
"""

from __future__ import annotations

import math
import struct

_MULTIPLIER = 0x5DEECE66D
_ADDEND = 0xB
_MASK = (1 << 48) - 1
_DOUBLE_UNIT = 1.0 / (1 << 53)


def _to_int32(value: int) -> int:
    """Reinterpret the low 32 bits of ``value`` as a signed Java ``int``."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


class JavaRandom:
    """Drop-in equivalent of ``java.util.Random`` for the methods the simulator needs."""

    __slots__ = ("_seed", "_next_gaussian")

    def __init__(self, seed: int) -> None:
        self.set_seed(seed)

    def set_seed(self, seed: int) -> None:
        """``setSeed``: scramble the 64-bit seed and drop any cached Gaussian."""
        self._seed = (seed ^ _MULTIPLIER) & _MASK
        self._next_gaussian: float | None = None

    def next(self, bits: int) -> int:
        """``next(bits)``: advance the LCG and return its top ``bits`` bits as a signed int."""
        if not 1 <= bits <= 32:
            raise ValueError("bits must be in 1..32")
        self._seed = (self._seed * _MULTIPLIER + _ADDEND) & _MASK
        return _to_int32(self._seed >> (48 - bits))

    def next_int(self, bound: int | None = None) -> int:
        """``nextInt()`` (any 32-bit int) or ``nextInt(bound)`` (uniform in [0, bound))."""
        if bound is None:
            return self.next(32)
        if bound <= 0:
            raise ValueError("bound must be positive")
        if bound & (bound - 1) == 0:  # a power of two: take the high bits
            return (bound * self.next(31)) >> 31
        while True:
            bits = self.next(31)
            value = bits % bound
            # reject the top partial range so every value is equally likely;
            # Java tests this with int overflow: bits - value + (bound - 1) < 0
            if bits - value + (bound - 1) < (1 << 31):
                return value

    def next_long(self) -> int:
        """``nextLong()``: two 32-bit draws combined into a signed 64-bit value."""
        value = (self.next(32) << 32) + self.next(32)
        value &= (1 << 64) - 1
        return value - (1 << 64) if value >> 63 else value

    def next_boolean(self) -> bool:
        """``nextBoolean()``."""
        return self.next(1) != 0

    def next_float(self) -> float:
        """``nextFloat()``: 24 random bits scaled into [0, 1)."""
        return self.next(24) / float(1 << 24)

    def next_double(self) -> float:
        """``nextDouble()``: 53 random bits (26 + 27) scaled into [0, 1)."""
        return ((self.next(26) << 27) + self.next(27)) * _DOUBLE_UNIT

    def next_gaussian(self) -> float:
        """``nextGaussian()``: Marsaglia's polar method, caching the second value as Java does."""
        if self._next_gaussian is not None:
            value, self._next_gaussian = self._next_gaussian, None
            return value
        while True:
            v1 = 2 * self.next_double() - 1
            v2 = 2 * self.next_double() - 1
            s = v1 * v1 + v2 * v2
            if 0 < s < 1:
                break
        # Java uses StrictMath.log (fdlibm) and sqrt (correctly rounded, as math.sqrt is)
        multiplier = math.sqrt(-2 * fdlibm_log(s) / s)
        self._next_gaussian = v2 * multiplier
        return v1 * multiplier


def _from_words(high: int, low: int) -> float:
    return struct.unpack(">d", struct.pack(">II", high, low))[0]


def _words(x: float) -> tuple[int, int]:
    high, low = struct.unpack(">II", struct.pack(">d", x))
    return high, low


_LN2_HI = _from_words(0x3FE62E42, 0xFEE00000)
_LN2_LO = _from_words(0x3DEA39EF, 0x35793C76)
_TWO54 = _from_words(0x43500000, 0x00000000)
_LG = (
    _from_words(0x3FE55555, 0x55555593),
    _from_words(0x3FD99999, 0x9997FA04),
    _from_words(0x3FD24924, 0x94229359),
    _from_words(0x3FCC71C5, 0x1D8E78AF),
    _from_words(0x3FC74664, 0x96CB03DE),
    _from_words(0x3FC39A09, 0xD078C69F),
    _from_words(0x3FC2F112, 0xDF3E5244),
)


def fdlibm_log(x: float) -> float:
    """Natural log exactly as ``java.lang.StrictMath.log`` computes it (fdlibm's e_log.c).

    The platform ``math.log`` may differ from it in the last bit, which would make
    ``next_gaussian`` drift from Java.
    """
    lg1, lg2, lg3, lg4, lg5, lg6, lg7 = _LG
    high, low = _words(x)
    hx = high - (1 << 32) if high & 0x80000000 else high  # signed high word
    k = 0
    if hx < 0x00100000:  # zero, negative or subnormal
        if (hx & 0x7FFFFFFF) | low == 0:
            return -math.inf
        if hx < 0:
            return math.nan
        k -= 54
        x *= _TWO54
        hx = _words(x)[0]
    if hx >= 0x7FF00000:
        return x + x
    k += (hx >> 20) - 1023
    hx &= 0x000FFFFF
    i = (hx + 0x95F64) & 0x100000
    x = _from_words(hx | (i ^ 0x3FF00000), _words(x)[1])  # normalise x or x/2
    k += i >> 20
    f = x - 1.0
    dk = float(k)
    if (0x000FFFFF & (2 + hx)) < 3:  # |f| < 2**-20
        if f == 0.0:
            return 0.0 if k == 0 else dk * _LN2_HI + dk * _LN2_LO
        r = f * f * (0.5 - 0.33333333333333333 * f)
        return f - r if k == 0 else dk * _LN2_HI - ((r - dk * _LN2_LO) - f)
    s = f / (2.0 + f)
    z = s * s
    i = hx - 0x6147A
    w = z * z
    j = 0x6B851 - hx
    t1 = w * (lg2 + w * (lg4 + w * lg6))
    t2 = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7)))
    i |= j
    r = t2 + t1
    if i > 0:
        hfsq = 0.5 * f * f
        if k == 0:
            return f - (hfsq - s * (hfsq + r))
        return dk * _LN2_HI - ((hfsq - (s * (hfsq + r) + dk * _LN2_LO)) - f)
    if k == 0:
        return f - s * (f - r)
    return dk * _LN2_HI - ((s * (f - r) - dk * _LN2_LO) - f)
