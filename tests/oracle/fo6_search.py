"""Search 16x16 tiles whose 4over6 choice depends on the 2D error summation order (spec §9.1:
row sums, then the (r0..7 + r8..15) -> +4 -> +2 -> +1 tree).  Hill-climbs |err4 - err6| to 0,
then keeps tiles where the tree order and a plain sequential sum pick different candidates.
Appends the tiles (amax, EMAX, MSE flag, 256 fp32 in hex) to OUTFILE; tests/oracle/fo6_tiles.txt,
which compare.py's mode 'fo6tile' draws from, was made so.
usage: python3 fo6_search.py SEED SECONDS OUTFILE"""
import os, random, sys, time, struct
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvfp4_oracle as O

def evals(rows, amax, emax, mse):
    a_b = O.absmax([v for r in rows for v in r])
    t = O.fo6_candidates(rows, a_b, amax, emax, mse)
    s = O.fo6_candidates([[v for r in rows for v in r]], a_b, amax, emax, mse)
    return t, s

def search(rng, budget):
    emax = rng.choice([256, 448]); mse = rng.random() < 0.5
    sc = 2.0 ** rng.randint(-3, 3)
    rows = [[O.f32(rng.gauss(0, 1) * sc) for _ in range(16)] for _ in range(16)]
    rows[0][0] = 4.0 * sc
    amax = O.f32(4.0 * sc * rng.choice([1, 1, 2, 3.3]))
    t, s = evals(rows, amax, emax, mse)
    best = abs(t[2][0] - t[2][1])
    t0 = time.time()
    while time.time() - t0 < budget:
        i, j = rng.randrange(16), rng.randrange(16)
        if (i, j) == (0, 0): continue
        old = rows[i][j]
        rows[i][j] = O.f32(old + rng.gauss(0, 1) * sc * rng.choice([1, 0.1, 0.01, 1e-4]))
        if abs(rows[i][j]) > 4.0 * sc: rows[i][j] = old; continue
        t, s = evals(rows, amax, emax, mse)
        if t[0] != s[0]:
            return rows, amax, emax, mse
        d = abs(t[2][0] - t[2][1])
        if d <= best: best = d
        else: rows[i][j] = old
    return None

rng = random.Random(int(sys.argv[1]))
T = float(sys.argv[2])
out = open(sys.argv[3], 'a')
t0 = time.time(); n = 0
while time.time() - t0 < T:
    r = search(rng, 40)
    if r:
        rows, amax, emax, mse = r
        n += 1
        out.write('%s %d %d %s\n' % (struct.pack('<f', amax).hex(), emax, mse,
                  ''.join(struct.pack('<f', v).hex() for row in rows for v in row)))
        out.flush()
print('found', n)
