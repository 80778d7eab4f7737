#!/usr/bin/env python3
"""Byte-for-byte comparison of libnvfp4's quantize/dequantize with the independent oracle.

usage: python3 compare.py [--lua PATH] [--seed S] [--n N] [--only MODE] [--big] [--out DIR] [--jobs J]
Generates N random and adversarial cases (inputs x options x shapes), runs them through
nvfp4-lua (--lua; default $NVFP4_LUA, else _build/lua/nvfp4-lua) with harness.lua, recomputes
every buffer with nvfp4_oracle.py and reports every differing buffer.  The case files and
mismatch_seedS.txt go to --out (default: a temporary directory, removed when every case
matched).  Ends with "N passed, N failed"; exit 0 when every case matched, 1 otherwise
(a mismatch, or a case the library refused).
"""
import argparse, math, os, random, shutil, struct, subprocess, sys, tempfile, time
from multiprocessing import Pool
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvfp4_oracle as O

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))   # the source tree (tests/oracle/..)
LUA = os.environ.get('NVFP4_LUA') or os.path.join(ROOT, '_build', 'lua', 'nvfp4-lua')

E2M1_TIES = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
E2M1_GRID = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def f32_next(x, n=1):
    b = O.f32_bits(x)
    if x >= 0:
        b += n
    else:
        b -= n
    return O.bits_f32(b & 0xFFFFFFFF)


# ----------------------------------------------------------------------------- value generators
def to_dtype(v, dt):
    """Round a double to the dtype; return (exact float, bit pattern)."""
    if dt == 'fp32':
        f = O.f32(v)
        return f, O.f32_bits(f)
    b = O.bf16_round(v if not isinstance(v, float) or not math.isnan(v) else v)
    return O.bf16_bits_to_float(b), b


def gen_values(rng, kind, M, K, dt):
    n = M * K
    if kind == 'normal':
        s = 10.0 ** rng.uniform(-6, 6)
        return [rng.gauss(0, 1) * s for _ in range(n)]
    if kind == 'normal_wide':      # every block its own magnitude
        out = []
        for i in range(n // 16):
            s = 2.0 ** rng.uniform(-60, 60)
            out += [rng.gauss(0, 1) * s for _ in range(16)]
        return out + [rng.gauss(0, 1) for _ in range(n - len(out))]
    if kind == 'uniform':
        return [rng.uniform(-1, 1) * 3.0 for _ in range(n)]
    if kind == 'ties':
        # global max 2688*2^k -> S_enc = 2^-k; block max 6*2^(k+p) -> sf = 2^p exact, enc = 2^-(k+p):
        # y lands exactly on E2M1 ties (and on the grid, and 1 ulp off ties)
        k = rng.randint(-20, 20)
        out = []
        for b in range(n // 16):
            p = rng.randint(-8, 8)
            sc = 2.0 ** (k + p)
            blk = []
            for t in range(16):
                c = rng.random()
                if c < 0.5:
                    v = rng.choice(E2M1_TIES)
                elif c < 0.7:
                    v = rng.choice(E2M1_GRID)
                else:
                    v = f32_next(rng.choice(E2M1_TIES), rng.choice([-1, 1]))
                blk.append(v * rng.choice([-1, 1]) * sc)
            blk[rng.randrange(16)] = 6.0 * sc * rng.choice([-1, 1])
            out += blk
        out += [0.0] * (n - len(out))
        out[rng.randrange(n)] = 2688.0 * 2.0 ** k
        return out
    if kind == 'scaleties':
        # block maxima chosen so that s = a_b * m falls on / near E4M3 rounding ties
        out = []
        amax = 2688.0 * 2.0 ** rng.randint(-10, 10)
        senc = O.s_enc(amax)
        m = O.mul32(senc, O.INV6)
        for b in range(n // 16):
            # target e4m3 midpoint
            e = rng.randint(-9, 8)
            mid = (8 + rng.randint(0, 7) + 0.5) * 2.0 ** (e - 3)
            a_b = O.div32(mid, m)
            a_b = f32_next(a_b, rng.randint(-2, 2)) if a_b != 0 else a_b
            blk = [rng.uniform(-1, 1) * a_b for _ in range(16)]
            blk[rng.randrange(16)] = a_b * rng.choice([-1, 1])
            out += blk
        out += [0.0] * (n - len(out))
        out[rng.randrange(n)] = amax
        return out
    if kind == 'zeros':
        return [rng.choice([0.0, -0.0]) for _ in range(n)]
    if kind == 'sparse':
        return [rng.gauss(0, 1) if rng.random() < 0.1 else rng.choice([0.0, -0.0]) for _ in range(n)]
    if kind == 'tinyblocks':
        # one huge element, the other blocks tiny: E4M3 subnormal or zero scales
        out = []
        for b in range(n // 16):
            s = 10.0 ** rng.uniform(-12, -1)
            out += [rng.gauss(0, 1) * s for _ in range(16)]
        out += [0.0] * (n - len(out))
        out[rng.randrange(n)] = rng.choice([1.0, 100.0, 1e4, 1e6])
        return out
    if kind == 'subnormal':
        lim = 1.1754943508222875e-38
        return [rng.uniform(-1, 1) * lim * rng.choice([1, 1e-3, 1e-6]) for _ in range(n)]
    if kind == 'huge':
        mx = 3.4028234663852886e38 if dt == 'fp32' else 3.3895313892515355e38
        return [rng.uniform(-1, 1) * mx * rng.choice([1, 0.5, 1e-3]) for _ in range(n)]
    if kind == 'inf':
        v = [rng.gauss(0, 1) for _ in range(n)]
        for _ in range(rng.randint(1, 3)):
            v[rng.randrange(n)] = rng.choice([math.inf, -math.inf])
        return v
    if kind == 'nan':
        v = [rng.gauss(0, 1) for _ in range(n)]
        for _ in range(rng.randint(1, 3)):
            v[rng.randrange(n)] = math.nan
        return v
    if kind == 'bits':   # arbitrary bit patterns (returned as ('bits', list))
        if dt == 'bf16':
            return ('bits', [rng.getrandbits(16) for _ in range(n)])
        return ('bits', [rng.getrandbits(32) for _ in range(n)])
    if kind == 'const':
        c = rng.choice([1.0, -3.0, 6.0, 0.5, 1e-20])
        return [c] * n
    if kind == 'rhtadv':
        # per 16-row block of each column: 1 + half-ulp(bf16) + tiny: an exact sum rounds off the bf16
        # tie, a double or fp32 accumulation lands on it (spec §8 'round once')
        v = [0.0] * n
        for k in range(K):
            for j in range(M // 16):
                a = rng.randint(-30, 30)
                pos = rng.sample(range(16), 3 + rng.randint(0, 2))
                vals = [2.0 ** a, 2.0 ** (a - 8), 2.0 ** (a - 8 - rng.randint(17, 100))]
                while len(vals) < len(pos):
                    vals.append(2.0 ** (a - 8 - rng.randint(17, 100)))
                for p, val in zip(pos, vals):
                    v[(16 * j + p) * K + k] = val * rng.choice([-1, 1])
        return v
    if kind == 'sr256':
        # enc = 1 everywhere but the block holding 2688: y = lo + step*k/256 exactly
        v = []
        for b in range(n // 16):
            blk = []
            for t in range(16):
                lo_i = rng.randrange(7)
                lo, hi = E2M1_GRID[lo_i], E2M1_GRID[lo_i + 1]
                blk.append((lo + (hi - lo) * rng.randrange(256) / 256.0) * rng.choice([-1, 1]))
            blk[rng.randrange(16)] = 6.0
            v += blk
        v += [0.0] * (n - len(v))
        v[0] = 2688.0
        return v
    if kind == 'int':
        return [float(rng.randint(-50, 50)) for _ in range(n)]
    raise ValueError(kind)


# ----------------------------------------------------------------------------- cases
SHAPES_BOTH = [(16, 160), (32, 256), (16, 16), (16, 32), (32, 16), (32, 32), (48, 64), (64, 48), (16, 128), (128, 16),
               (2, 8, 32), (4, 4, 16), (3, 16, 16), (2, 2, 4, 32), (256, 16), (144, 32)]
SHAPES_ROW = [(1, 16), (3, 32), (5, 16), (17, 48), (7, 2, 16), (16,), (48,), (1, 1, 64), (130, 16)]

KINDS = ['rhtadv', 'sr256', 'normal', 'normal', 'normal_wide', 'uniform', 'ties', 'ties', 'scaleties', 'zeros', 'sparse',
         'tinyblocks', 'subnormal', 'huge', 'inf', 'nan', 'bits', 'const', 'int']


def rand_amax(rng, computed):
    c = rng.random()
    if c < 0.3:
        return O.f32(computed * rng.choice([0.5, 0.25, 1e-3, 2.0, 1.0]))
    if c < 0.5:
        return O.f32(2.0 ** rng.randint(-30, 30) * rng.choice([1.0, 2688.0, 1536.0, 3.0]))
    if c < 0.6:
        return rng.choice([0.0, math.inf, 1e-45, 1.1754943508222875e-38, 3.4028234663852886e38])
    return O.f32(10.0 ** rng.uniform(-10, 10))


# the modes a case is drawn from (twice: twice as likely); --only takes one
MODE_DRAW = ['row', 'col', 'both', 'both', 'rht', 'rht', 'sr', 'sr', 'srrht', '2d', '2d',
             'fo6', 'fo6', 'fo6_2d', 'rowshape', 'amax', 'amax', 'fo6tile']
MODES = sorted(set(MODE_DRAW))


def make_case(rng, idx, only=None):
    mode = only or rng.choice(MODE_DRAW)
    o = {}
    dt = rng.choice(['fp32', 'bf16'])
    shape = rng.choice(SHAPES_BOTH)
    if mode == 'row':
        o['row'] = 1
    elif mode == 'col':
        o['col'] = 1
    elif mode == 'both':
        o['row'] = 1; o['col'] = 1
    elif mode in ('rht', 'srrht'):
        dt = 'bf16'
        o['col'] = 1; o['rht'] = 1
        if rng.random() < 0.6:
            o['row'] = 1
        if rng.random() < 0.3:
            o['signs'] = 0
        if mode == 'srrht':
            o['sr'] = 1
    elif mode == 'sr':
        r = rng.random()
        if r < 0.4:
            o['row'] = 1
        elif r < 0.7:
            o['col'] = 1
        else:
            o['row'] = 1; o['col'] = 1
        o['sr'] = 1
    elif mode in ('2d', 'fo6', 'fo6_2d'):
        r = rng.random()
        if r < 0.4:
            o['row'] = 1; o['col'] = 1
        elif r < 0.7:
            o['row'] = 1
        else:
            o['col'] = 1
        if mode in ('2d', 'fo6_2d'):
            o['two_d'] = 1
        if mode.startswith('fo6'):
            o['fo6'] = 1
            if rng.random() < 0.5:
                o['err'] = 'mse'
            if rng.random() < 0.5:
                o['emax'] = 448
            elif rng.random() < 0.3:
                o['emax'] = 256
        if mode == '2d' and 'col' not in o and rng.random() < 0.5:
            shape = rng.choice(SHAPES_ROW)
    elif mode == 'rowshape':
        o['row'] = 1
        shape = rng.choice(SHAPES_ROW)
        r = rng.random()
        if r < 0.3:
            o['sr'] = 1
        elif r < 0.5:
            o['fo6'] = 1
    elif mode == 'amax':
        r = rng.random()
        o['row'] = 1
        if r < 0.5:
            o['col'] = 1
        if rng.random() < 0.3:
            dt = 'bf16'; o['col'] = 1; o['rht'] = 1
        elif rng.random() < 0.2:
            o['two_d'] = 1
        elif rng.random() < 0.2:
            o['fo6'] = 1
        elif rng.random() < 0.2:
            o['sr'] = 1
    if o.get('sr'):
        o['seed'] = rng.choice([0, 1, 12345, rng.getrandbits(64), (1 << 64) - 1])
        o['offset'] = rng.choice([0, 0, 1, 7, rng.getrandbits(20), (1 << 64) - 1, (1 << 64) - 3])
    M = 1
    for d in shape[:-1]:
        M *= d
    K = shape[-1]
    kind = rng.choice(KINDS)
    if mode == 'fo6tile':
        kind = 'fo6tile'
        dt = 'fp32'
        line = rng.choice(FO6_TILES).split()
        amax = struct.unpack('<f', bytes.fromhex(line[0]))[0]
        o['fo6'] = 1; o['two_d'] = 1
        o['emax'] = int(line[1])
        r = rng.random()
        if r < 0.4:
            o['col'] = 1
        elif r < 0.7:
            o['row'] = 1; o['col'] = 1
        if line[2] == '1':
            o['err'] = 'mse'
        tile = [struct.unpack('<f', bytes.fromhex(line[3][8 * i:8 * i + 8]))[0] for i in range(256)]
        shape = rng.choice([(16, 16), (32, 32), (16, 48), (2, 16, 32)])
        M = 1
        for d in shape[:-1]:
            M *= d
        K = shape[-1]
        mt, kt = rng.randrange(M // 16), rng.randrange(K // 16)
        tr = rng.random() < 0.3        # also the transposed tile
        vals = [0.0] * (M * K)
        for i in range(16):
            for j in range(16):
                v = tile[j * 16 + i] if tr else tile[i * 16 + j]
                vals[(16 * mt + i) * K + 16 * kt + j] = v
        o['amax'] = amax
    elif o.get('fo6') and rng.random() < 0.3:
        kind = 'fo6scaleties'
        vals = gen_fo6scaleties(rng, M, K, o)
    elif o.get('sr') and not o.get('rht') and rng.random() < 0.25:
        kind = 'srcorner'
        vals = gen_srcorner(rng, M, K, o)
    else:
        vals = gen_values(rng, kind, M, K, dt)
    if isinstance(vals, tuple):
        bits = vals[1]
        if dt == 'bf16':
            x = [O.bf16_bits_to_float(b) for b in bits]
        else:
            x = [O.bits_f32(b) for b in bits]
    else:
        x, bits = [], []
        for v in vals:
            f, b = to_dtype(v, dt)
            x.append(f); bits.append(b)
    if dt == 'bf16':
        raw = b''.join(struct.pack('<H', b) for b in bits)
    else:
        raw = b''.join(struct.pack('<I', b) for b in bits)
    if mode == 'amax' or rng.random() < 0.08:
        comp = O.absmax(x)
        a = rand_amax(rng, comp if math.isfinite(comp) else 1.0)
        o['amax'] = a
        if rng.random() < 0.5:
            o['amaxc'] = rand_amax(rng, comp if math.isfinite(comp) else 1.0)
    return dict(id=idx, dt=dt, shape=shape, opts=o, raw=raw, kind=kind, mode=mode)


def gen_fo6scaleties(rng, M, K, o):
    # 4over6 (spec §9.1): block maxima putting base = fl(fl(a_b/6)*S_enc) (map-to-6) or fl(base*1.5)
    # (map-to-4) on or next to an E4M3 rounding midpoint; 1D rowwise blocks
    emax = 448 if o.get('emax') == 448 else 256
    amax = O.f32(6.0 * emax * 2.0 ** rng.randint(-8, 8) * rng.choice([1.0, 1.1, 0.9]))
    senc = O.s_enc(amax, emax)
    n = M * K
    out = []
    for b in range(n // 16):
        e = rng.randint(-6, 7)
        mid = (8 + rng.randint(0, 7) + 0.5) * 2.0 ** (e - 3)
        if rng.random() < 0.5:
            mid = mid / 1.5
        a_b = O.mul32(O.div32(mid, senc), 6.0)
        a_b = f32_next(a_b, rng.randint(-3, 3))
        if a_b > amax:
            a_b = amax
        blk = [rng.uniform(-1, 1) * a_b for _ in range(16)]
        blk[rng.randrange(16)] = a_b * rng.choice([-1, 1])
        out += blk
    out += [0.0] * (n - len(out))
    o['amax'] = amax
    o.pop('amaxc', None)
    return out


def gen_srcorner(rng, M, K, o):
    # spec §5.2: 'round up iff frac + r/256 >= 1' vs the fallback's fmaf(r/256, step, a): with enc = 1,
    # x = (256 - r)/512 - 1ulp gives frac + r/256 = 1 - tiny (round down) while the fma rounds t to 0.5
    # (x < 0.25).  Uses the library's documented byte mapping (lib/NUMERICS.md §5.2).
    col_only = not o.get('row')
    n = M * K
    v = [0.0] * n
    for m in range(M):
        for k in range(K):
            if col_only:
                r = O.sr_bits_lib(o['seed'], o['offset'], 1, K, M, k, m)
            else:
                r = O.sr_bits_lib(o['seed'], o['offset'], 0, M, K, m, k)
            x = f32_next((256 - r) / 512.0, -1) if r else 0.5 - 2.0 ** -25
            if rng.random() < 0.2:
                x = (256 - r) / 512.0          # exactly frac + r/256 == 1: rounds up
            v[m * K + k] = x * rng.choice([-1, 1])
    # every 16-block (in both directions) needs max 6 for enc = 1; put 6 on a diagonal-ish pattern
    for m in range(M):
        for kb in range(K // 16):
            v[m * K + 16 * kb + ((m + 5 * kb) % 16)] = 6.0
    v[0] = 2688.0
    return v


FO6_TILES = []
if os.path.exists(os.path.join(HERE, 'fo6_tiles.txt')):
    FO6_TILES = [l for l in open(os.path.join(HERE, 'fo6_tiles.txt')) if l.strip()]


def case_line(c):
    parts = []
    for k, v in c['opts'].items():
        if k in ('amax', 'amaxc'):
            parts.append('%s=%s' % (k, float(v).hex() if math.isfinite(v) else ('1e999' if v > 0 else 'nan')))
        elif k in ('seed', 'offset'):
            parts.append('%s=0x%x' % (k, v))
        else:
            parts.append('%s=%s' % (k, v))
    return '%d|%s|%s|%s|%s' % (c['id'], c['dt'], ','.join(map(str, c['shape'])), ';'.join(parts), c['raw'].hex())


def decode_input(c):
    raw = c['raw']
    if c['dt'] == 'bf16':
        return [O.bf16_bits_to_float(struct.unpack_from('<H', raw, 2 * i)[0]) for i in range(len(raw) // 2)]
    return [struct.unpack_from('<f', raw, 4 * i)[0] for i in range(len(raw) // 4)]


def oracle_opts(c):
    o = c['opts']
    amax = None
    if 'amax' in o:
        amax = (o['amax'], o.get('amaxc', o['amax']))
    emax448 = o.get('emax') == 448
    return O.Opts(rowwise=bool(o.get('row')), columnwise=bool(o.get('col')), rht=bool(o.get('rht')),
                  signs=o.get('signs', 1) == 1, sr=bool(o.get('sr')), seed=o.get('seed', 0),
                  offset=o.get('offset', 0), two_d=bool(o.get('two_d')), fo6=bool(o.get('fo6')),
                  fo6_mse=o.get('err') == 'mse', emax448=emax448, amax=amax)


def f32hex(v):
    return struct.pack('<f', v).hex()


def nan_tolerant_equal(a, b, width):
    """bytes equal, except NaN vs NaN of any payload (width 4 fp32 / 2 bf16)."""
    if a == b:
        return True
    if len(a) != len(b):
        return False
    for i in range(0, len(a), width):
        x, y = a[i:i + width], b[i:i + width]
        if x != y:
            if width == 4:
                fx, fy = struct.unpack('<f', x)[0], struct.unpack('<f', y)[0]
            else:
                fx, fy = O.bf16_bits_to_float(struct.unpack('<H', x)[0]), O.bf16_bits_to_float(struct.unpack('<H', y)[0])
            if not (math.isnan(fx) and math.isnan(fy)):
                return False
    return True


def check_case(args):
    c, res = args
    fields = res.split('|')
    o = c['opts']
    M = 1
    for d in c['shape'][:-1]:
        M *= d
    K = c['shape'][-1]
    if fields[1] == 'ERR':
        return [('error', fields[2])]
    lib = dict(zip(['rd', 'rs', 'cd', 'cs', 'ar', 'ac', 'dr32', 'dr16', 'dc32', 'dc16'], fields[2:]))
    x = decode_input(c)
    oo = oracle_opts(c)
    exp = O.quantize(x, M, K, oo)
    diffs = []
    for key in ('rd', 'rs', 'cd', 'cs'):
        e = exp.get(key)
        g = lib[key]
        eh = e.hex() if e is not None else '-'
        if eh != g:
            diffs.append((key, first_diff(eh, g), eh, g))
    for key in ('ar', 'ac'):
        e = exp.get(key)
        eh = f32hex(e) if e is not None else '-'
        if eh != lib[key] and not (e is not None and math.isnan(e) and lib[key] in ('0000c07f', '0000c0ff')):
            diffs.append((key, 'amax', eh, lib[key]))
    # dequantize of the library's own buffers (isolates §10 from the quantize)
    emax = 256 if (o.get('fo6') and o.get('emax') != 448) else 448
    for d, a, sc, keys, R, C in (('rd', 'ar', 'rs', ('dr32', 'dr16'), M, K),
                                 ('cd', 'ac', 'cs', ('dc32', 'dc16'), K, M)):
        if lib[d] == '-':
            continue
        amax = struct.unpack('<f', bytes.fromhex(lib[a]))[0]
        data, scales = bytes.fromhex(lib[d]), bytes.fromhex(lib[sc])
        for key, ot, w in ((keys[0], 'fp32', 4), (keys[1], 'bf16', 2)):
            e = O.dequant_rows(data, scales, amax, R, C, emax, ot)
            g = bytes.fromhex(lib[key])
            if not nan_tolerant_equal(e, g, w):
                diffs.append((key, first_diff(e.hex(), g.hex()), e.hex(), g.hex()))
    return diffs


def first_diff(a, b):
    if len(a) != len(b):
        return 'length %d vs %d' % (len(a) // 2, len(b) // 2)
    for i in range(0, len(a), 2):
        if a[i:i + 2] != b[i:i + 2]:
            return 'byte %d: exp %s got %s' % (i // 2, a[i:i + 2], b[i:i + 2])
    return 'equal?'


def run_lib(cases, tmp):
    inp, outp = tmp + '.in', tmp + '.out'
    with open(inp, 'w') as f:
        for c in cases:
            f.write(case_line(c) + '\n')
    subprocess.run([LUA, os.path.join(HERE, 'harness.lua'), inp, outp], check=True,
                   stdin=subprocess.DEVNULL)
    res = {}
    with open(outp) as f:
        for line in f:
            line = line.rstrip('\n')
            res[int(line.split('|', 1)[0])] = line
    return res


def main():
    global LUA
    ap = argparse.ArgumentParser()
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--n', type=int, default=200)
    ap.add_argument('--only', default=None, choices=MODES, help='draw cases of this mode only')
    ap.add_argument('--lua', default=None, help='nvfp4-lua to run (default %s)' % LUA)
    ap.add_argument('--out', default=None, help='directory for the case files (default: a temporary one)')
    ap.add_argument('--jobs', type=int, default=2)
    ap.add_argument('--verbose', action='store_true')
    ap.add_argument('--big', action='store_true', help='large shapes (TE test sizes)')
    a = ap.parse_args()
    if a.lua:
        LUA = a.lua
    temp = a.out is None
    if temp:
        a.out = tempfile.mkdtemp(prefix='nvfp4-oracle.')
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    t0 = time.time()
    if a.big:
        SHAPES_BOTH[:] = [(256, 272), (304, 304), (128, 1024), (8, 32, 256), (2048, 32)]
        SHAPES_ROW[:] = [(300, 272), (1000, 48)]
    cases = [make_case(rng, i, a.only) for i in range(a.n)]
    res = run_lib(cases, os.path.join(a.out, 'run%d' % a.seed))
    t1 = time.time()
    with Pool(a.jobs) as p:
        allres = p.map(check_case, [(c, res[c['id']]) for c in cases], chunksize=4)
    t2 = time.time()
    from collections import Counter
    stats, bad, errs = Counter(), Counter(), Counter()
    nbad = 0
    with open(os.path.join(a.out, 'mismatch_seed%d.txt' % a.seed), 'w') as f:
        for c, d in zip(cases, allres):
            tag = c['mode']
            stats[tag] += 1
            if d and d[0][0] == 'error':
                errs[(tag, d[0][1][:100])] += 1
                f.write('ERROR %s\n' % case_line(c)[:300])
                f.write('  %s\n' % d[0][1])
                continue
            if d:
                nbad += 1
                bad[(tag, c['kind'], tuple(sorted(set(k for k, *_ in d))))] += 1
                f.write('CASE %s kind=%s mode=%s\n' % (case_line(c)[:200], c['kind'], c['mode']))
                for key, fd, e, g in d:
                    f.write('  %s %s\n' % (key, fd))
                if a.verbose:
                    print('MISMATCH', c['id'], c['mode'], c['kind'], c['dt'], c['shape'], c['opts'], [(k, fd) for k, fd, *_ in d])
    print('seed %d: %d cases (%s), lib %.1fs, oracle %.1fs; mismatching cases: %d; library errors: %d'
          % (a.seed, len(cases), dict(stats), t1 - t0, t2 - t1, nbad, sum(errs.values())))
    for k, v in sorted(bad.items(), key=lambda kv: -kv[1]):
        print('  mismatch', v, k)
    for k, v in errs.items():
        print('  error', v, k)
    nfail = nbad + sum(errs.values())
    if nfail:
        print('the failing cases: %s' % os.path.join(a.out, 'mismatch_seed%d.txt' % a.seed))
    elif temp:
        shutil.rmtree(a.out, ignore_errors=True)
    print('%d passed, %d failed' % (len(cases) - nfail, nfail))
    return 1 if nfail else 0


if __name__ == '__main__':
    sys.exit(main())
