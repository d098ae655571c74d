"""Scoring kernels and Hamming selection, per dimension and per query, on this interpreter.

Run ``python -m bench.kernels`` under each Python (3.11, 3.12, 3.13) to reproduce the
"Kernel choice" and "Hamming selection" tables of docs/performance-history.md. Pure standard
library; prints one line per kernel (best of 5, or median of 7 for the 100k passes).
"""

import heapq
import math
import operator
import random
import struct
import sys
import time
from array import array
from collections import Counter
from itertools import compress

rng = random.Random(1)
d = 384
n = 2000
flat = array("f", [rng.gauss(0, 1) for _ in range(n * d)])
mv = memoryview(flat)
q = [rng.gauss(0, 1) for _ in range(d)]
qt = tuple(q)
tuples = [tuple(flat[i * d : (i + 1) * d]) for i in range(n)]
blob = flat.tobytes()
S = struct.Struct(f"<{d}f")


def t(name, f, reps=5):
    best = min(_t(f) for _ in range(reps))
    print(f"{sys.version.split()[0]} {name:45s} {best / (n * d) * 1e9:6.2f} ns/dim")


def _t(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


rng_ = range(0, n * d, d)
t("sum(map(mul)) tuples", lambda: [sum(map(operator.mul, v, qt)) for v in tuples])
t("dist tuples", lambda: [math.dist(qt, v) for v in tuples])
t("dist array slice", lambda: [math.dist(qt, flat[i : i + d]) for i in rng_])
t("dist memoryview slice", lambda: [math.dist(qt, mv[i : i + d]) for i in rng_])
t("dist struct.unpack_from", lambda: [math.dist(qt, S.unpack_from(blob, 4 * i)) for i in rng_])
t("sum(map(mul)) array slice", lambda: [sum(map(operator.mul, flat[i : i + d], qt)) for i in rng_])
if hasattr(math, "sumprod"):
    sp = math.sumprod
    t("sumprod tuples", lambda: [sp(v, qt) for v in tuples])
    t("sumprod array slice", lambda: [sp(flat[i : i + d], qt) for i in rng_])
    t("sumprod memoryview slice", lambda: [sp(mv[i : i + d], qt) for i in rng_])
    t("sumprod struct.unpack_from", lambda: [sp(S.unpack_from(blob, 4 * i), qt) for i in rng_])
# hamming + select at 100k
N = 100_000
codes = [rng.getrandbits(d) for _ in range(N)]
qc = rng.getrandbits(d)


def tt(name, f, reps=7):
    best = sorted(_t(f) for _ in range(reps))[reps // 2]
    print(f"{sys.version.split()[0]} {name:45s} {best * 1e3:6.2f} ms (N=100k)")


tt("ham listcomp", lambda: [(c ^ qc).bit_count() for c in codes])
bc = int.bit_count
tt("ham map chain", lambda: list(map(bc, map(qc.__xor__, codes))))
ds = list(map(bc, map(qc.__xor__, codes)))
C = 800
tt("nsmallest key", lambda: heapq.nsmallest(C, range(N), key=ds.__getitem__))
tt("sorted dists", lambda: sorted(ds))
t_ = sorted(ds)[C]
tt("compress thr", lambda: list(compress(range(N), map(t_.__ge__, ds))))
tt(
    "fused ham+compress",
    lambda: list(compress(range(N), map(t_.__ge__, map(bc, map(qc.__xor__, codes))))),
)
tt("sample sort 1/64", lambda: sorted(ds[::64]))

tt("Counter", lambda: Counter(ds))
