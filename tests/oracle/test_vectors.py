"""Check the oracle against spec §16 TV1..TV12 (and §5.2 SR examples, §2 E4M3 facts)."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvfp4_oracle import *

def bf(hexs):
    return [bf16_bits_to_float(int(h, 16)) for h in hexs.split()]

def packed(codes):
    return ' '.join('%02X' % (codes[2*i] | codes[2*i+1] << 4) for i in range(8))

def run1d(x, amax, emax=448):
    senc = s_enc(amax, emax)
    sf, enc = block_scale_default(absmax(x), senc)
    codes = encode_elems(x, enc)
    return sf, enc, codes

def deq_bf16(codes, sf, amax, emax=448):
    factor = div32(1.0, float(6*emax))
    final = mul32(mul32(e4m3_value(sf), amax), factor)
    return final, [bf16_bits_to_float(bf16_round(mul32(e2m1_value(c), final))) for c in codes]

fails = 0
def check(name, got, exp):
    global fails
    ok = got == exp
    if not ok: fails += 1
    print(('ok  ' if ok else 'FAIL'), name, got if not ok else '', '' if ok else 'expected %s' % (exp,))

# TV1
x = [0.10009765625, -0.2001953125, 0.349609375, 0.5, -0.75, 1.0, 1.296875, -1.703125,
     2.203125, 2.59375, -3.09375, 3.296875, 4.40625, -5.0, 5.5, 6.09375]
check('TV1 bf16 bits', [bf16_round(v) for v in x], [int(h,16) for h in '3DCD BE4D 3EB3 3F00 BF40 3F80 3FA6 BFDA 400D 4026 C046 4053 408D C0A0 40B0 40C3'.split()])
check('TV1 senc', f32_bits(s_enc(21504.0)), 0x3E000000)
sf, enc, codes = run1d(x, 21504.0)
check('TV1 sf', sf, 0x20); check('TV1 packed', packed(codes), '80 11 2A B3 54 5D E6 77')
check('TV1 deq', deq_bf16(codes, sf, 21504.0)[1], [0, -0.0, 0.5, 0.5, -1, 1, 1.5, -1.5, 2, 3, -3, 3, 4, -4, 6, 6])

# TV2
x = bf('4040 C03A 3C24 BCA4 3F8D 3F1A BECD 4010 BFCD 3F66 3E9A C006 3FF3 BE1A 3D4D 402D')
senc = s_enc(3.0); check('TV2 senc', f32_bits(senc), 0x44600000); check('TV2 sdec', f32_bits(s_dec(senc)), 0x3A924925)
check('TV2 m', f32_bits(mul32(senc, INV6)), 0x43155556)
check('TV2 s', f32_bits(mul32(3.0, mul32(senc, INV6))), 0x43E00001)
sf, enc, codes = run1d(x, 3.0)
check('TV2 sf/enc', (sf, enc), (0x7E, 2.0)); check('TV2 codes', codes, [int(c,16) for c in '7 F 0 8 4 2 A 6 D 4 1 E 6 9 0 7'.split()])
check('TV2 packed', packed(codes), 'F7 80 24 6A 4D E1 96 70')
check('TV2 deq', deq_bf16(codes, sf, 3.0), (0.5, [3, -3, 0, -0.0, 1, 0.5, -0.5, 2, -1.5, 1, 0.25, -2, 2, -0.25, 0, 3]))

# TV3
x = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0, 0.0]
sf, enc, codes = run1d(x, 2688.0)
check('TV3 sf', (sf, enc), (0x38, 1.0)); check('TV3 packed', packed(codes), '20 42 64 76 A8 CA EC 0E')
# TV4
x = [-0.125, -0.2421875, 0.2578125, -0.2578125, 0.7421875, -0.7578125, 4.96875, -5.03125,
     6.0, -6.0, 1.0, -1.0, 0.5, -0.5, 0.0078125, -0.0078125]
sf, enc, codes = run1d(x, 2688.0)
check('TV4 packed', packed(codes), '88 91 A1 F6 F7 A2 91 80')
check('TV4 extra -0/NaN', (e2m1_rn(-0.0), e2m1_rn(float('nan'))), (8, 7))
# TV5
x = bf('3D4D BD24 3CF6 BCA4 3C24 3BA4 BD38 3D0F 3CCD BC76 0000 3D49 BA83 3C45 BD07 3D28')
senc = s_enc(10000.0); check('TV5 senc/sdec/m', (f32_bits(senc), f32_bits(s_dec(senc)), f32_bits(mul32(senc, INV6))), (0x3E89A027, 0x406E1862, 0x3D378034))
sf, enc, codes = run1d(x, 10000.0)
check('TV5 sf enc', (sf, f32_bits(enc)), (0x01, 0x4309A027)); check('TV5 packed', packed(codes), 'F7 D6 13 6F C5 70 38 7E')
final, d = deq_bf16(codes, sf, 10000.0)
check('TV5 final', f32_bits(final), 0x3BEE1862)
check('TV5 deq', d, [0.043701171875, -0.043701171875, 0.029052734375, -0.0218505859375,
  0.01092529296875, 0.003631591796875, -0.043701171875, 0.029052734375, 0.0218505859375,
  -0.0145263671875, 0, 0.043701171875, -0.0, 0.01092529296875, -0.029052734375, 0.043701171875])
# TV6
x = bf('3A83 BA03 0000 3952 BA83 3A6C 38D2 B99D 0000 39D2 BA38 3A1D 3A52 B952 399D BA6C')
sf, enc, codes = run1d(x, 2688.0)
check('TV6 sf enc', (sf, enc), (0, FLT_MAX)); check('TV6 packed', packed(codes), 'F7 70 7F F7 70 7F F7 F7')
# TV7
x = [4.0, -3.0, 2.0, -1.0, 0.5, 0.25, -0.125, 1.5, -2.5, 3.5, 0.75, -0.0625, 1.25, -1.75, 0.0, 0.10009765625]
sf, enc, codes = run1d(x, 1.0)
check('TV7 sf enc', (sf, enc), (0x7E, 6.0)); check('TV7 packed', packed(codes), 'F7 F7 35 7A 7F 96 F7 10')
check('TV7 deq', deq_bf16(codes, sf, 1.0)[1], [1, -1, 1, -1, 0.5, 0.25, -0.1669921875, 1, -1, 1, 0.66796875, -0.08349609375, 1, -1, 0, 0.08349609375])
# TV8
sf, enc, codes = run1d([0.0]*16, 0.0)
check('TV8', (sf, packed(codes)), (0, '00 00 00 00 00 00 00 00'))
# TV9
v = [1.0, -2.0, 0.5, 3.0, -1.5, 0.25, 2.0, -0.75, 1.25, -3.5, 0.125, 4.0, -0.5, 1.75, -2.25, 0.375]
r = rht16(v, 0xD7E8)
check('TV9 rht', ' '.join('%04X' % b for b in r), '3F70 BFA0 BD80 BF60 3EC0 3D80 0000 3EA0 C086 4020 3F10 3FB0 BF20 40A6 3F80 BFA8')
check('TV9 rht nosign', [bf16_bits_to_float(b) for b in rht16(v, 0)], [0.9375, -0.625, -2.5625, 2.5, 1.25, 1.3125, -2.875, 4.5625, 0.3125, 1.375, -0.9375, -2.0, 0.0, -1.5625, 1.875, 0.4375])
y = [bf16_bits_to_float(b) for b in r]
am = absmax(y); check('TV9 amax', am, 5.1875)
sf, enc, codes = run1d(y, am)
check('TV9 sf enc', (sf, f32_bits(enc)), (0x7E, 0x3F940C57)); check('TV9 packed', packed(codes), 'B2 A8 01 10 5E 31 79 B2')
# full path through quantize(): a 16x1 column... columnwise needs K%16 -> 16x16 with column 0 = v
X = [0.0]*256
for m in range(16): X[m*16] = v[m]
o = quantize(X, 16, 16, Opts(columnwise=True, rht=True))
check('TV9 via quantize (col 0)', ' '.join('%02X' % b for b in o['cd'][:8]), 'B2 A8 01 10 5E 31 79 B2')
check('TV9 via quantize amax', o['ac'], 5.1875)
# TV10
x = [5.0, 4.09375, -3.90625, 2.046875, 1.0, -0.6015625, 0.44921875, 3.046875, -2.90625,
     1.546875, 0.2001953125, -4.59375, 2.453125, -1.1015625, 0.80078125, 3.59375]
sf, enc, errs = fo6_candidates([x], absmax(x), 20.0, 256, False)
codes = encode_elems(x, enc)
check('TV10 256', (sf, f32_bits(enc), packed(codes), errs), (0x6C, 0x3F4CCCCD, '56 3D 92 41 2C E0 A4 51', (3.5048828125, 4.0048828125)))
check('TV10 256 deq', deq_bf16(codes, sf, 20.0, 256), (1.25, [5, 3.75, -3.75, 1.875, 1.25, -0.625, 0.625, 2.5, -2.5, 1.25, 0, -5, 2.5, -1.25, 0.625, 3.75]))
sf, enc, errs = fo6_candidates([x], absmax(x), 20.0, 448, False)
codes = encode_elems(x, enc)
check('TV10 448', (sf, packed(codes), f32_bits(errs[0]), errs[1]), (0x72, '56 3D 92 51 3C E0 A4 51', 0x406FB187, 4.0048828125))
sf, enc, codes = run1d(x, 20.0)
check('TV10 std', (sf, packed(codes)), (0x6E, '67 4E 92 61 4D F0 B5 62'))
# TV11
x = [5.25, 1.5625, -1.5625, 0.5, -2.0, 3.0, 0.10009765625, -0.30078125, 4.0, -4.5, 2.59375, -0.8984375, 1.203125, 0.0, -5.0, 0.69921875]
sf, enc, codes = run1d(x, 60.0)
check('TV11', (sf, f32_bits(enc), packed(codes)), (0x62, 0x3F8F5C28, '37 1B 5C 90 F6 A5 03 2F'))
check('TV11 final', f32_bits(deq_bf16(codes, sf, 60.0)[0]), 0x3F649249)
# TV12
x = [36, -20, 12.5, -7, 3, 30, -33, 0.5, 18, -25, 9, 1, -14, 27, -4, 0]
x = [float(v) for v in x]
sf, enc, codes = run1d(x, 96.0)
check('TV12', (sf, f32_bits(enc), packed(codes)), (0x73, 0x3E22E8BA, 'D7 A4 61 0F E5 03 6C 09'))
final, d = deq_bf16(codes, sf, 96.0)
check('TV12 deq', (f32_bits(final), d), (0x40C92493, [37.75, -18.875, 12.5625, -6.28125, 3.140625, 25.125, -37.75, 0, 18.875, -25.125, 9.4375, 0, -12.5625, 25.125, -3.140625, 0]))

# §2 E4M3 facts
check('E4M3 handy', [e4m3_rn(v) for v in (1.0, 0.125, 40, 64, 96, 112, 160, 176, 448, 2**-9, 0.013671875, 2**-6)],
      [0x38, 0x20, 0x62, 0x68, 0x6C, 0x6E, 0x72, 0x73, 0x7E, 0x01, 0x07, 0x08])
check('E4M3 edges', [e4m3_rn(v) for v in (2**-10, 2**-10*1.0001, 464.0, 464.1, float('inf'), float('nan'), -1e-30)],
      [0, 1, 0x7E, 0x7E, 0x7E, 0x7F, 0x80])
# §1 ties
check('E2M1 ties', [E2M1_VAL[e2m1_rn(v)&7] for v in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)], [0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0])
check('E2M1 sat', [e2m1_rn(v) for v in (7.0, -6.5, float('inf'), float('-inf'))], [7, 15, 7, 15])
# §5.2 SR examples
def srv(y, r, var='exact'): c = e2m1_sr(f32(y), r, var); return e2m1_value(c)
for var in ('exact', 'fma'):
    check('SR examples ' + var, [srv(2.3,179,var), srv(2.3,180,var), srv(0.3,102,var), srv(0.3,103,var), srv(-1.2,153,var), srv(-1.2,154,var),
       srv(5.0,127,var), srv(5.0,128,var), srv(3.75,63,var), srv(3.75,64,var), srv(6.0,255,var), srv(7.5,0,var)],
      [2, 3, 0, 0.5, -1.0, -1.5, 4, 6, 3, 4, 6, 6])
# §12 offsets not needed (compact layout only)
print('FAILS:', fails)
sys.exit(1 if fails else 0)
