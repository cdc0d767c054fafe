"""The CUDA attention kernels run on tensor cores: the sm_90 machine code (SASS, `cuobjdump -sass`) of the CUDA build's
cu_attention_tc.cu object has HMMA (mma.sync) and LDSM (ldmatrix) instructions in each of its forward and backward
kernels, so a scalar fallback cannot slip back in unnoticed (docs/design.md "CUDA kernels"). Skips, saying why, where
the CUDA build (make CUDA=1 -> build-cuda/, or OMNISHARD_CUDA_BUILD) or cuobjdump (tools/setup-cuda.sh puts it in
.cuda/; CUOBJDUMP names another) is absent."""
import os, re, shutil, subprocess
import pytest

from conftest import ROOT

CUDA_BUILD = ROOT / os.environ.get("OMNISHARD_CUDA_BUILD", "build-cuda")
OBJ = CUDA_BUILD / "obj/src/cuda/cu_attention_tc.cu.o"


def cuobjdump():
    for c in (os.environ.get("CUOBJDUMP"), os.environ.get("CUDA_HOME") and os.path.join(os.environ["CUDA_HOME"], "bin/cuobjdump"),
              ROOT / ".cuda/nvidia/cu13/bin/cuobjdump", shutil.which("cuobjdump")):
        if c and os.access(c, os.X_OK):
            return str(c)
    return None


def sass_by_kernel():
    """{mangled kernel name: its sm_90 SASS text}"""
    if not OBJ.exists():
        pytest.skip(f"the CUDA kernels' SASS check needs the CUDA build ({OBJ} is missing): build it with `make CUDA=1 cuda` (no GPU needed)")
    tool = cuobjdump()
    if not tool:
        pytest.skip("the CUDA kernels' SASS check needs cuobjdump: `bash tools/setup-cuda.sh` installs it into .cuda/ (or set CUOBJDUMP to one)")
    env = dict(os.environ, PATH=os.path.dirname(tool) + os.pathsep + os.environ.get("PATH", ""))   # its nvdisasm
    p = subprocess.run([tool, "-sass", "-arch", "sm_90", str(OBJ)], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    parts = re.split(r"^\s*Function : (\S+)\s*$", p.stdout, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


# forward: per 64-key tile and warp, S = Q K^T is D/16 x 8 mma and O += P V 4 x D/8; backward: per tile pair and warp,
# S^T, dP^T (D/16 x 4 each), dV, dK (2 x D/8 each) and dQ (4 x D/16): what the unrolled loops hold (fewer: a product
# left the tensor cores)
@pytest.mark.parametrize("kernel,least", [("att_tc_fwd_kernelILi64E", 64), ("att_tc_fwd_kernelILi128E", 128),
                                          ("att_tc_bwd_kernelILi64E", 80), ("att_tc_bwd_kernelILi128E", 160)])
def test_attention_kernels_run_on_tensor_cores(kernel, least):
    sass = sass_by_kernel()
    found = [name for name in sass if kernel in name]
    assert len(found) == 1, (kernel, sorted(sass))
    code = sass[found[0]]
    hmma = re.findall(r"\bHMMA\.16816\.F32\.BF16\b", code)
    assert len(hmma) >= least, f"{found[0]}: {len(hmma)} HMMA.16816.F32.BF16 instructions, at least {least} expected"
    assert re.search(r"\bLDSM\.16\.", code), f"{found[0]}: no ldmatrix (LDSM) in its SASS"
    assert re.search(r"\bLDGSTS\b", code), f"{found[0]}: no cp.async (LDGSTS) in its SASS"
