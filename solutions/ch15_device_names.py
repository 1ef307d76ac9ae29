"""Chapter 15, reference answer: device names read and written (exercise in
``exercises/ch15_device_names.py``; the lab's own is
:class:`backends.tf_runtime.cluster.DeviceName`)."""

from __future__ import annotations

DeviceTuple = tuple[str, int, int, str, int]
DEFAULTS: DeviceTuple = ("worker", 0, 0, "CPU", 0)


def format_device_name(device: DeviceTuple) -> str:
    """The canonical order: job, replica, task, device."""
    job, replica, task, device_type, index = device
    return f"/job:{job}/replica:{replica}/task:{task}/device:{device_type}:{index}"


def _number(name: str, key: str, value: str) -> int:
    if not value.isdigit() or not value.isascii():
        raise ValueError(f"{name!r}: {key} must be a number, got {value!r}")
    return int(value)


def parse_device_name(name: str) -> DeviceTuple:
    """Each part once, in any order; the missing ones from :data:`DEFAULTS`."""
    if not name.startswith("/"):
        raise ValueError(f"a device name starts with '/': {name!r}")
    job, replica, task, device_type, index = DEFAULTS
    seen: set[str] = set()
    for part in name[1:].split("/"):
        key, colon, value = part.partition(":")
        key = key.lower()
        if not colon or key not in ("job", "replica", "task", "device", "cpu", "gpu"):
            raise ValueError(f"{name!r}: {part!r} is not job:, replica:, task: or device:")
        if key in ("cpu", "gpu"):  # the legacy /cpu:0
            key, value = "device", f"{key}:{value}"
        if key in seen:
            raise ValueError(f"{name!r} gives {key} twice")
        seen.add(key)
        if key == "job":
            if not value.isidentifier() or not value.isascii():
                raise ValueError(f"{name!r}: bad job name {value!r}")
            job = value
        elif key == "replica":
            replica = _number(name, key, value)
        elif key == "task":
            task = _number(name, key, value)
        else:
            kind, _, digits = value.partition(":")
            if not kind.isalpha() or not kind.isascii():
                raise ValueError(f"{name!r}: device must be TYPE:INDEX, got {value!r}")
            device_type, index = kind.upper(), _number(name, "the device index", digits)
    return job, replica, task, device_type, index
