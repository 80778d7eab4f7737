#!/usr/bin/env python3
"""Sensitivity check: apply one deliberate deviation from the spec to the oracle and confirm the
comparison with the library then fails (so a pass of compare.py means something).
usage: python3 mutate.py MUTATION [compare.py args]
Exit 1 when the comparison fails (what a mutation must do), 0 when every case still matched, 2 for a
usage error (an unknown mutation, a bad option), 3 when the comparison itself crashed."""
import os, sys, math
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvfp4_oracle as O
mut = sys.argv.pop(1)

if mut == 'scale_div':        # block scale (a_b/6)*S_enc instead of a_b*fl(S_enc*inv6)
    def f(a_b, senc):
        sdec = O.s_dec(senc)
        s = O.fminf(O.mul32(O.div32(a_b, 6.0), senc), O.FLT_MAX)
        sf = O.e4m3_rn(s); d = O.mul32(O.e4m3_value(sf), sdec)
        return sf, O.fminf(O.div32(1.0, d), O.FLT_MAX)
    O.block_scale_default = f
elif mut == 'enc_div':        # enc = S_enc/sf
    def f(a_b, senc):
        s = O.fminf(O.mul32(a_b, O.mul32(senc, O.INV6)), O.FLT_MAX)
        sf = O.e4m3_rn(s); v = O.e4m3_value(sf)
        return sf, (O.FLT_MAX if v == 0 else O.fminf(O.div32(senc, v), O.FLT_MAX))
    O.block_scale_default = f
elif mut == 'sr_fma':
    orig = O.e2m1_sr
    O.e2m1_sr = lambda y, r, variant='exact': orig(y, r, 'fma')
elif mut == 'sr_ptxmap':      # PTX byte<->element mapping inside each 32-bit word
    orig = O.sr_bits_lib
    def f(seed, offset, d, R, C, i, j):
        e = i * C + j; k = e % 4; perm = [0, 2, 1, 3][k]
        base = e - k
        return orig(seed, offset, d, R, C, (base + perm) // C, (base + perm) % C)
    O.SR_BITS = f
elif mut == 'rht_f64':
    def f(v, mask=O.RHT_SIGNS):
        out = []
        for c in range(16):
            acc = 0.0
            for r in range(16):
                acc += v[r] * O.hadamard_sign(r, c) * (-1 if (mask >> r) & 1 else 1)
            out.append(O.bf16_round(acc * 0.25))
        return out
    O.rht16 = f
elif mut == 'fo6_seq':        # 2D 4over6 error summed in plain order
    orig = O.fo6_candidates
    def f(rows, a_b, amax, emax, mse):
        if len(rows) == 1: return orig(rows, a_b, amax, emax, mse)
        return orig([[v for r in rows for v in r]], a_b, amax, emax, mse)
    O.fo6_candidates = f
elif mut == 'fo6_tie4':
    src = O.fo6_candidates
    def f(rows, a_b, amax, emax, mse):
        sf, enc, (e4, e6) = src(rows, a_b, amax, emax, mse)
        if e4 == e6:   # pick map-to-4
            senc = O.s_enc(amax, emax); sdec = O.s_dec(senc)
            base = O.mul32(O.div32(a_b, 6.0), senc)
            sf4 = O.e4m3_rn(O.fminf(O.mul32(base, 1.5), 448.0))
            return sf4, O.fminf(O.div32(1.0, O.mul32(O.e4m3_value(sf4), sdec)), O.FLT_MAX), (e4, e6)
        return sf, enc, (e4, e6)
    O.fo6_candidates = f
elif mut == 'neg0':
    orig = O.e2m1_rn
    O.e2m1_rn = lambda y: 0 if (y == 0) else orig(y)
elif mut == 'nan0':
    orig = O.e2m1_rn
    O.e2m1_rn = lambda y: 0 if math.isnan(y) else orig(y)
elif mut == 'inf_amax_fused':  # S_enc(+Inf) = 0 (RHT-fused kernel rule)
    orig = O.s_enc
    O.s_enc = lambda a, emax=448: 0.0 if a == math.inf else orig(a, emax)
elif mut == 'deq_sdec':
    def f(data, scales, amax, R, C, emax, otype):
        import struct
        senc = O.s_enc(amax, emax); sdec = O.s_dec(senc)
        Cp = O.roundup(C // 16, 4); out = bytearray()
        for r in range(R):
            for j in range(C // 16):
                final = O.mul32(O.e4m3_value(scales[r * Cp + j]), sdec)
                for t in range(16):
                    c = 16 * j + t; b = data[r * (C // 2) + c // 2]
                    v = O.mul32(O.e2m1_value((b >> 4) if c & 1 else b & 15), final)
                    out += struct.pack('<f', v) if otype == 'fp32' else struct.pack('<H', O.bf16_round(v))
        return bytes(out)
    O.dequant_rows = f
elif mut == 'amax_shared':    # one amax for both directions (rowwise's), spec §6 fallback note
    origq = O.quantize
    def f(x, M, K, opts):
        if opts.amax is not None: opts.amax = (opts.amax[0], opts.amax[0])
        return origq(x, M, K, opts)
    O.quantize = f
elif mut == 'e4m3_halfup':
    O._rne_int = lambda q: math.floor(q + 0.5)
elif mut == 'e2m1_tie_up':    # 2.5 -> 3, 0.25 -> 0.5 etc.
    orig = O.e2m1_rn
    def f(y):
        a = abs(y)
        if a in (0.25, 1.25, 2.5, 5.0):
            return orig(y) + 1
        return orig(y)
    O.e2m1_rn = f
elif mut == 'block_nan':      # NaN in a block makes its amax NaN
    orig = O.absmax
    O.absmax = lambda xs: math.nan if any(math.isnan(x) for x in xs) else orig(xs)
elif mut == 'sr_stream_same':  # columnwise uses stream 0 too
    orig = O.sr_bits_lib
    O.SR_BITS = lambda seed, off, d, R, C, i, j: orig(seed, off, 0, R, C, i, j)
elif mut == 'fo6_errmul':     # error uses * fl(1/(6*EMAX)) instead of / (6*EMAX)
    src = O.div32
    def fo(rows, a_b, amax, emax, mse):
        E = float(6 * emax); inv = src(1.0, E)
        senc = O.s_enc(amax, emax); sdec = O.s_dec(senc)
        base = O.mul32(src(a_b, 6.0), senc)
        res = []
        for sf in (O.e4m3_rn(O.fminf(O.mul32(base, 1.5), 448.0)), O.e4m3_rn(O.fminf(base, 448.0))):
            sf32 = O.e4m3_value(sf); enc = O.fminf(src(1.0, O.mul32(sf32, sdec)), O.FLT_MAX)
            rs = []
            for row in rows:
                err = 0.0
                for x in row:
                    q = O.e2m1_value(O.e2m1_rn(O.mul32(x, enc)))
                    d = O.add32(O.mul32(O.mul32(O.mul32(q, sf32), amax), inv), -x)
                    err = O.add32(err, O.mul32(d, d) if mse else abs(d))
                rs.append(err)
            if len(rows) == 1: tot = rs[0]
            else:
                r = rs + [0.0] * (16 - len(rs))
                for h in (8, 4, 2, 1): r = [O.add32(r[i], r[i + h]) for i in range(h)]
                tot = r[0]
            res.append((sf, enc, tot))
        return (res[0][0], res[0][1], (res[0][2], res[1][2])) if res[0][2] < res[1][2] else (res[1][0], res[1][1], (res[0][2], res[1][2]))
    O.fo6_candidates = fo
elif mut == 'fo6_scale_mul':  # 4over6 base = a_b * fl(S_enc*inv6) like §4
    src = O.fo6_candidates
    orig_div = O.div32
    def fo(rows, a_b, amax, emax, mse):
        O.div32 = lambda a, b: O.mul32(a, O.INV6) if b == 6.0 else orig_div(a, b)
        try: return src(rows, a_b, amax, emax, mse)
        finally: O.div32 = orig_div
    O.fo6_candidates = fo
else:
    print('mutate.py: unknown mutation %r' % mut, file=sys.stderr)
    sys.exit(2)
import compare
try:
    rc = compare.main()
except Exception:                # a crash is not a caught deviation: exit 3, not 1
    import traceback
    traceback.print_exc()
    sys.exit(3)
sys.exit(rc)
