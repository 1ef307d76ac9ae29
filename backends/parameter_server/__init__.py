"""A PS-Lite-style parameter server on ``torch.distributed`` (book ch. 3).

Read in this order — the same parts as PS-Lite (github.com/dmlc/ps-lite), rebuilt in Python:

* :mod:`.message` — a message: header (``Meta``) and tensor payloads;
* :mod:`.van` — the transport: point-to-point sends, a receiving thread per node;
* :mod:`.postoffice` — roles, node ids, registration, barriers, key ranges, failures;
* :mod:`.customer` — outstanding requests by timestamp, ``wait(ts)``;
* :mod:`.kv_app` — ``SimpleApp``, ``KVWorker`` (push, pull, slicing by key range),
  ``KVServer`` and ``KVStore`` (update rule, BSP / SSP / async);
* :mod:`.updaters` — server-side update rules (SGD, Adam);
* :mod:`.models` — sparse logistic regression and a small MLP as flat key spaces;
* :mod:`.train` — the roles' loops and ``train(PSConfig(...))``.

The simulated twin is :mod:`simulator.parameter_server`.
"""

from backends.parameter_server.customer import Customer
from backends.parameter_server.kv_app import KVServer, KVStore, KVWorker, SimpleApp
from backends.parameter_server.message import Command, Message, Meta
from backends.parameter_server.postoffice import NodeFailure, Postoffice, PSConfigError
from backends.parameter_server.train import (
    PSConfig,
    PSResult,
    bounded_delay_wait,
    run_node,
    sgd_reference,
    train,
)
from backends.parameter_server.updaters import SGD, Adam
from backends.parameter_server.van import Van

__all__ = ["SGD", "Adam", "Command", "Customer", "KVServer", "KVStore", "KVWorker", "Message",
           "Meta", "NodeFailure", "PSConfig", "PSConfigError", "PSResult", "Postoffice",
           "SimpleApp", "Van", "bounded_delay_wait", "run_node", "sgd_reference", "train"]
