//! Constant buffers (`buf<E, const>`, contract §2.2 `Constant`) as uniform buffers.
//!
//! A constant buffer is a `Uniform` block of one member, `uvec4 data[CONSTANT_VEC4S]`: under
//! std140 an array's stride is 16 bytes whatever its element, so the bytes are declared as
//! 16-byte vectors and every element is reassembled from its 32-bit words (a 64-bit scalar
//! from two, an 8- or 16-bit one shifted out of one). The buffer's bytes are bound as they
//! are, with no repacking on the host. The block covers [`CONSTANT_BYTES`] bytes: the Vulkan
//! device reports at most that as its constant limit, and a larger view is refused at launch
//! (`XPU-L040`).

use super::*;

/// The bytes a constant buffer's block declares (64 KiB, the constant bank of CUDA and the
/// `maxUniformBufferRange` of most discrete parts).
pub const CONSTANT_BYTES: u32 = 64 * 1024;

/// `uvec4`s in the block.
const CONSTANT_VEC4S: u32 = CONSTANT_BYTES / 16;

/// GLSL.std.450 `UnpackHalf2x16`.
const UNPACK_HALF_2X16: u32 = 62;

impl Emitter<'_> {
    /// Declares a constant buffer's block type: `struct { uvec4 data[N]; }`, `Block`, member
    /// offset 0, array stride 16.
    pub(super) fn constant_block(&mut self) -> Word {
        let u = self.u32t();
        let v4 = self.tk(TyKey::Vec(u, 4));
        let n = self.cu32(CONSTANT_VEC4S);
        // Fresh ids: the explicit layout must not reach a type other uses share.
        let aid = self.b.id();
        let at = self.b.type_array_id(Some(aid), v4, n);
        self.b.decorate(
            at,
            spirv::Decoration::ArrayStride,
            vec![Operand::LiteralBit32(16)],
        );
        let sid = self.b.id();
        let s = self.b.type_struct_id(Some(sid), vec![at]);
        self.b.decorate(s, spirv::Decoration::Block, vec![]);
        self.b.member_decorate(
            s,
            0,
            spirv::Decoration::Offset,
            vec![Operand::LiteralBit32(0)],
        );
        // A uniform block is read-only by its storage class (no NonWritable, as glslang).
        s
    }

    /// 32-bit word `w` (a `u32` id) of constant buffer `p`.
    fn constant_word(&mut self, p: u32, w: Word) -> Word {
        let var = self.buffers[p as usize]
            .as_ref()
            .expect("a buffer parameter")
            .var;
        let u = self.u32t();
        let two = self.cu32(2);
        let three = self.cu32(3);
        let vec = self.opi(Op::ShiftRightLogical, u, &[w, two]);
        let comp = self.opi(Op::BitwiseAnd, u, &[w, three]);
        let pt = self.tk(TyKey::Ptr(StorageClass::Uniform, u));
        let z = self.cu32(0);
        let ptr = self.opi(Op::AccessChain, pt, &[var, z, vec, comp]);
        self.load(u, ptr)
    }

    /// Scalar `k` (a `u32` id) of constant buffer `p`, whose scalars are `s`, as a value.
    pub(super) fn constant_scalar(&mut self, p: u32, k: Word, s: Scalar) -> SpirvResult<Word> {
        let u = self.u32t();
        match s.size() {
            4 => {
                let w = self.constant_word(p, k);
                let t = self.scalar_ty(s)?;
                Ok(if s == Scalar::U32 {
                    w
                } else {
                    self.opi(Op::Bitcast, t, &[w])
                })
            }
            8 => {
                let t = self.scalar_ty(s)?;
                let one = self.cu32(1);
                let lo_at = self.opi(Op::ShiftLeftLogical, u, &[k, one]);
                let hi_at = self.opi(Op::IAdd, u, &[lo_at, one]);
                let lo = self.constant_word(p, lo_at);
                let hi = self.constant_word(p, hi_at);
                let v2 = self.tk(TyKey::Vec(u, 2));
                let pair = self.opi(Op::CompositeConstruct, v2, &[lo, hi]);
                Ok(self.opi(Op::Bitcast, t, &[pair]))
            }
            size => {
                // 8- and 16-bit scalars: shifted out of their word.
                let per_word = 4 / size;
                let log = per_word.trailing_zeros();
                let lg = self.cu32(log);
                let w_at = self.opi(Op::ShiftRightLogical, u, &[k, lg]);
                let w = self.constant_word(p, w_at);
                let lane_mask = self.cu32(per_word - 1);
                let lane = self.opi(Op::BitwiseAnd, u, &[k, lane_mask]);
                let bits = self.cu32(size * 8);
                let shift = self.opi(Op::IMul, u, &[lane, bits]);
                let shifted = self.opi(Op::ShiftRightLogical, u, &[w, shift]);
                let mask = self.cu32(if size == 1 { 0xff } else { 0xffff });
                let raw = self.opi(Op::BitwiseAnd, u, &[shifted, mask]);
                match s {
                    Scalar::Bool => {
                        let b = self.tk(TyKey::Bool);
                        let z = self.cu32(0);
                        Ok(self.opi(Op::INotEqual, b, &[raw, z]))
                    }
                    Scalar::F16 => {
                        let t = self.scalar_ty(s)?;
                        let f = self.tk(TyKey::Float(32));
                        let v2 = self.tk(TyKey::Vec(f, 2));
                        let pair = self.ext_inst_raw(v2, UNPACK_HALF_2X16, &[raw]);
                        let x = self.op(
                            Op::CompositeExtract,
                            f,
                            vec![Operand::IdRef(pair), Operand::LiteralBit32(0)],
                        );
                        Ok(self.opi(Op::FConvert, t, &[x]))
                    }
                    _ => {
                        let t = self.scalar_ty(s)?;
                        let unsigned = self.tk(TyKey::Int(s.bits(), false));
                        let narrow = self.opi(Op::UConvert, unsigned, &[raw]);
                        Ok(if s.is_signed() {
                            self.opi(Op::Bitcast, t, &[narrow])
                        } else {
                            narrow
                        })
                    }
                }
            }
        }
    }
}
