#!/usr/bin/env python3
"""Checks ONNX files written by gd::onnx::export_model with ONNX's own tools.

    check_exported.py DIR NAME...

For each NAME, DIR/NAME.onnx must pass onnx.checker.check_model(full_check=True) and strict
shape inference, which must give the output the rank of gradus' output on DIR/NAME_input.pb
(DIR/NAME_output.pb). Where onnxruntime is installed, it runs the model on that input and must
match gradus' output (relative 1e-4, absolute 1e-5). Exits 77 (skipped) without the onnx package.
"""
import sys

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
except ImportError as e:
    print("check_exported: skipped, no onnx package (Debian's python3-onnx):", e)
    sys.exit(77)

try:
    import onnxruntime
except ImportError:
    onnxruntime = None


def tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    directory, names = sys.argv[1], sys.argv[2:]
    failures = 0
    for name in names:
        path = f"{directory}/{name}.onnx"
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        x, want = tensor(f"{directory}/{name}_input.pb"), tensor(f"{directory}/{name}_output.pb")
        out = inferred.graph.output[0].type.tensor_type.shape
        if len(out.dim) != want.ndim:
            print(f"{name}: shape inference gives rank {len(out.dim)}, gradus' output has rank {want.ndim}")
            failures += 1
            continue
        line = f"{name}: onnx {onnx.__version__} checker (full) and strict shape inference pass"
        if onnxruntime is not None:
            session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
            got = session.run(None, {session.get_inputs()[0].name: x})[0]
            diff = float(np.max(np.abs(got - want))) if got.size else 0.0
            ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5)
            line += f"; onnxruntime {onnxruntime.__version__}: {'matches' if ok else 'DIFFERS'} (largest difference {diff:.2e})"
            failures += 0 if ok else 1
        else:
            line += "; onnxruntime not installed, runtime comparison skipped"
        print(line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
