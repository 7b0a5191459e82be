"""Convert a GGUF file into a Hugging Face folder: runs in vLLM's virtual environment.

``python -I gguf_to_hf.py GGUF OUT DTYPE SHA256 RECIPE``, run by path in isolated mode (this
folder's ``gguf.py`` must not shadow the ``gguf`` package), imports nothing of this package
(vLLM's environment lacks it). transformers 5 keeps GGUF blocks packed unless told to
dequantize and refuses to save a model carrying its GGUF quantizer, so the dequantized weights
are loaded into a plain model of the same config, then saved in ``DTYPE``.
"""

from __future__ import annotations

import json
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

CONVERSION_RECORD = "modelsweep-conversion.json"


def convert(gguf: Path, out: Path, dtype_name: str, sha256: str, recipe: str) -> dict[str, Any]:
    """Write ``out`` (a Hugging Face folder in ``dtype_name``) and its record; the record."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = getattr(torch, dtype_name)
    started = time.time()
    kwargs: dict[str, Any] = (  # transformers 4 always dequantizes GGUF weights
        {"quantization_config": transformers.GgufConfig(dequantize=True)}
        if hasattr(transformers, "GgufConfig")
        else {}
    )
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, **kwargs)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(loaded.state_dict(), strict=True)
    plain = plain.to(dtype)
    major = int(transformers.__version__.split(".")[0])  # 5 names it dtype, 4 torch_dtype
    setattr(plain.config, "dtype" if major >= 5 else "torch_dtype", dtype)
    out.mkdir(parents=True)
    plain.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    saved = json.loads((out / "config.json").read_text())
    try:
        gguf_version: str | None = version("gguf")
    except PackageNotFoundError:
        gguf_version = None
    record = {
        "recipe": recipe,
        "source_gguf": str(gguf),
        "source_sha256": sha256,
        "architecture": (saved.get("architectures") or [None])[0],
        "model_type": saved.get("model_type"),
        "dtype": saved.get("dtype") or saved.get("torch_dtype"),
        "parameters": sum(p.numel() for p in plain.parameters()),
        "files": sorted(p.name for p in out.iterdir()),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "gguf": gguf_version,
        "seconds": round(time.time() - started, 1),
    }
    (out / CONVERSION_RECORD).write_text(json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str]) -> None:
    gguf, out, dtype_name, sha256, recipe = argv
    print(json.dumps(convert(Path(gguf), Path(out), dtype_name, sha256, recipe)))


if __name__ == "__main__":
    main(sys.argv[1:6])
