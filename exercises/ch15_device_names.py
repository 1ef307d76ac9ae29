"""Chapter 15 exercise: read and write TensorFlow's device names.

Every op of a TensorFlow graph is placed on a device named by a path of fields (textbook
chapter 15, "Device names")::

    /job:worker/replica:0/task:1/device:CPU:0

— the job, the replica (a copy of the job: always 0 in the lab), the task (one server process
of the job), and the device of that task, a type and an index. The lab's twin is
``backends.tf_runtime.cluster.DeviceName`` (TensorFlow's ``tf.DeviceSpec``): its ``parse``
reads such a string, its ``str`` writes it. Here you write both yourself, as plain functions
on a tuple ``(job, replica, task, device_type, index)``.

Grade your answer::

    make grade EX=15.1

and read ``solutions/ch15_device_names.py`` afterwards.
"""

from __future__ import annotations

DeviceTuple = tuple[str, int, int, str, int]
"""``(job, replica, task, device_type, index)``, e.g. ``("worker", 0, 1, "CPU", 0)``."""

DEFAULTS: DeviceTuple = ("worker", 0, 0, "CPU", 0)
"""What a field left out of a name stands for (the lab fills every field)."""


def format_device_name(device: DeviceTuple) -> str:
    """The full name of ``device``: ``/job:{job}/replica:{r}/task:{t}/device:{TYPE}:{i}``."""
    # ===== EXERCISE 15.1: parse and format device names ====================================
    #
    # Points: 4 (in proportion to the tests of ex15_1 that pass; `make grade EX=15.1`)
    #
    # Part 1 (this function): write the five fields in the canonical order, job, replica,
    # task, then the device as TYPE:INDEX, each field introduced by its name and a colon.
    #
    # Part 2 (parse_device_name below) reads a name back. What TensorFlow (and the lab)
    # accept:
    #   - a name starts with "/"; its parts are separated by "/";
    #   - a part is job:NAME, replica:N, task:N or device:TYPE:N, in ANY order, each at most
    #     once; a part left out takes its value from DEFAULTS;
    #   - the keys may be written in any case (JOB:worker); the device type is kept in
    #     upper case (device:gpu:1 is GPU 1);
    #   - the legacy short form /cpu:0 or /gpu:1 (also inside a longer name:
    #     /job:ps/task:0/cpu:0) is the device part written without "device:";
    #   - a job name is a Python-like identifier (letters, digits, _; not starting with a
    #     digit); replica, task and index are non-negative integers written in digits.
    #   Anything else raises ValueError, saying which part is wrong.
    #
    # Hints:
    #   1. str.partition(":") splits a part into its key and the rest; the device's rest
    #      "CPU:0" splits once more.
    #   2. Keep the fields you have read in a dict and refuse a key seen twice.
    #   3. str.isdigit, str.isalpha and str.isidentifier (or a regular expression) check
    #      the values; the defaults fill the dict at the end.
    #
    # What is graded (tests/exercises/test_ch15_device_names.py, `make grade EX=15.1`):
    #   - format: equal to str(DeviceName(...)) for many random devices;
    #   - parse: equal to DeviceName.parse on random names (fields shuffled, left out,
    #     legacy /cpu:N and /gpu:N, keys in any case), and format ∘ parse is the identity
    #     on full names;
    #   - bad names (no leading /, unknown keys, a field twice, non-numeric task, a device
    #     without its index, a bad job name) raise ValueError, as DeviceName.parse does.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 15.1: implement format_device_name in "
                              "exercises/ch15_device_names.py")


def parse_device_name(name: str) -> DeviceTuple:
    """``"/job:worker/replica:0/task:1/device:CPU:0"`` → ``("worker", 0, 1, "CPU", 0)``
    (see EXERCISE 15.1 above for the rules); :class:`ValueError` for a bad name."""
    raise NotImplementedError("EXERCISE 15.1: implement parse_device_name in "
                              "exercises/ch15_device_names.py")
