#!/usr/bin/env bash
# Stages what scripts/h200.sh needs into .device/ (git-ignored): the release `xpu` with every
# backend (../shared/device/stage.sh), and the `gpu` and `vulkan` test binaries, stripped and
# gzipped, with the path they were built in (they find their files through it).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
export LLVM_SYS_191_PREFIX=${LLVM_SYS_191_PREFIX:-/usr/lib/llvm-19}
../shared/device/stage.sh cuda,hip,vulkan
test_binary() {
  cargo test --release "$@" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])'
}
strip -o .device/test-gpu "$(test_binary --features cuda,hip --test gpu)"
strip -o .device/test-vulkan "$(test_binary --test vulkan)"
gzip -9f .device/test-gpu .device/test-vulkan
pwd > .device/manifest_dir
# Bundles of a few files, built here and run there (`xpu run FILE --bundle B`).
mkdir -p .device/bundles
gunzip -c .device/xpu.gz > .device/xpu-here && chmod +x .device/xpu-here
for f in examples/matmul.xk tests/filetests/ports/*.xk tests/filetests/linalg/readonly_matvec.xk; do
  .device/xpu-here build "$f" --backend cpu,vulkan,cuda -o ".device/bundles/$(basename "$f" .xk).xpub"
done
rm .device/xpu-here
du -sh .device .gl
