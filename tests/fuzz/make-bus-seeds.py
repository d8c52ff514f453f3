#!/usr/bin/env python3
# Writes the seed corpus of fuzz-bus: calls in its input format
# ([op][length][arguments], see fuzz-bus.c), named here so that the
# binary files can be read and remade.
#
#   make-bus-seeds.py DIR
import os
import struct
import sys

METHODS = ["CreateMachine", "GetMachine", "ListMachines", "RestoreAfterTraffic",
           "Manager.GetAll", "GetManagedObjects", "Manager.Introspect",
           "Start", "Stop", "Pause", "Resume", "Restart", "Standby", "Delete", "Update",
           "Rename", "SetDesiredState", "GetConsoleLog", "GetSpec", "Machine.GetAll",
           "Machine.Get", "Machine.Introspect"]
NO_WAIT = 0x80
FIRST = b"\x00"          # the first machine there is
BY_NAME = 0x80           # a name_or_id selector's bit: the name, not the ID


def call(method, args=b"", wait=True):
    op = METHODS.index(method) | (0 if wait else NO_WAIT)
    assert len(args) < 256
    return bytes([op, len(args)]) + args


def spec(name, extra=""):
    return ('{"name":"%s","hypervisor_type":"test","kernel":"/boot/vmlinuz"%s}'
            % (name, extra)).encode()


def create(doc, start=False):
    return call("CreateMachine", bytes([1 if start else 0]) + doc)


SEEDS = {
    "lifecycle": [create(spec("web")), call("Start", FIRST), call("Pause", FIRST),
                  call("Resume", FIRST), call("Stop", FIRST), call("Delete", FIRST + b"\x00")],
    "create-started-standby-wake": [create(spec("web", ',"standby_after_seconds":120'), True),
                                    call("Standby", FIRST), call("Start", FIRST),
                                    call("Restart", FIRST), call("GetSpec", FIRST)],
    "properties": [create(spec("web", ',"labels":{"team":"web"}'), True),
                   call("Machine.GetAll", FIRST), call("Machine.Get", FIRST + b"State"),
                   call("Machine.Get", FIRST + b"Spec"), call("Manager.GetAll"),
                   call("GetManagedObjects"), call("Machine.Introspect", FIRST),
                   call("Manager.Introspect")],
    "find": [create(spec("web")), call("GetMachine", bytes([BY_NAME])),
             call("GetMachine", b"\x00"), call("GetMachine", b"\x01nothing"),
             call("ListMachines")],
    "invalid-specs": [create(b'{"name":"a"'), create(spec("a", ',"cpu_millicores":99')),
                      create(spec("a/b")), create(spec("a", ',"colour":"red"')),
                      create(spec("a", ',"network_name":"default"')),
                      call("CreateMachine", b"\x80" + spec("flags"))],
    "idempotent-create": [create(b'{"id":"retry-1","name":"idem","hypervisor_type":"test","kernel":"/k"}'),
                          create(b'{"id":"retry-1","name":"idem","hypervisor_type":"test","kernel":"/k"}'),
                          create(b'{"id":"retry-1","name":"idem","hypervisor_type":"test","kernel":"/k2"}'),
                          create(spec("idem"))],
    "update-rename": [create(spec("upd", ',"standby_after_seconds":120'), True),
                      call("Update", FIRST + spec("upd", ',"standby_after_seconds":300')),
                      call("Update", FIRST + spec("upd", ',"cpu_millicores":2500')),
                      call("Rename", FIRST + b"renamed"), call("Rename", FIRST + b"a/b"),
                      call("SetDesiredState", FIRST + b"paused"),
                      call("SetDesiredState", FIRST + b"stopped"),
                      call("SetDesiredState", FIRST + b"exploded")],
    "failing-start-restarts": [create(spec("broken", ',"kernel_args":"test.fail-start",'
                                           '"restart":{"mode":"on-failure","max_retries":3}'), True),
                               call("Start", FIRST), call("Restart", FIRST)],
    "traffic": [create(spec("sleepy", ',"standby_after_seconds":60'), True),
                call("Standby", FIRST), call("RestoreAfterTraffic", b"\x00\x01"),
                call("RestoreAfterTraffic", b"\x00\x01"),
                call("RestoreAfterTraffic", b"\x01nothing")],
    "pipelined": [create(spec("a")), create(spec("b")),
                  call("Start", FIRST, wait=False), call("Delete", FIRST + b"\x01", wait=False),
                  call("Start", b"\x01", wait=False), call("Stop", b"\x01", wait=False),
                  call("Delete", b"\x01\x00")],
    "console": [create(spec("web"), True), call("GetConsoleLog", FIRST + struct.pack(">I", 10)),
                call("GetConsoleLog", FIRST + struct.pack(">I", 0)),
                call("GetSpec", b"\x05")],
    "remove-on-exit": [create(spec("tmp", ',"remove_on_exit":true,"restart":{"mode":"always"}'), True),
                       call("Stop", FIRST), call("ListMachines")],
}

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, calls in SEEDS.items():
    with open(os.path.join(out, name + ".bin"), "wb") as f:
        f.write(b"".join(calls))
