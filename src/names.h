/* Every public name of microvmd: bus, objects, interfaces, errors,
 * polkit actions, paths and log fields. Nothing else spells them out. */
#pragma once

#define MV_BUS_NAME              "org.microvmd1"
#define MV_MANAGER_PATH          "/org/microvmd1"
#define MV_MACHINE_PREFIX        "/org/microvmd1/machine"
#define MV_SNAPSHOT_PREFIX       "/org/microvmd1/snapshot"
#define MV_IMAGE_PREFIX          "/org/microvmd1/image"
#define MV_VOLUME_PREFIX         "/org/microvmd1/volume"
#define MV_NETWORK_PREFIX        "/org/microvmd1/network"
#define MV_WARM_IMAGE_PREFIX     "/org/microvmd1/warm"

#define MV_MANAGER_IFACE         "org.microvmd1.Manager"
#define MV_MACHINE_IFACE         "org.microvmd1.Machine"
#define MV_SNAPSHOT_IFACE        "org.microvmd1.Snapshot"
#define MV_IMAGE_IFACE           "org.microvmd1.Image"
#define MV_VOLUME_IFACE          "org.microvmd1.Volume"
#define MV_NETWORK_IFACE         "org.microvmd1.Network"
#define MV_WARM_IMAGE_IFACE      "org.microvmd1.WarmImage"

#define MV_API_VERSION           1

/* Flags of Manager.CreateMachine. */
#define MV_CREATE_START          (UINT64_C (1) << 0)
/* The image's pull policy: neither bit is "missing". */
#define MV_CREATE_PULL_ALWAYS    (UINT64_C (1) << 1)
#define MV_CREATE_PULL_NEVER     (UINT64_C (1) << 2)
#define MV_CREATE_KNOWN_FLAGS    (MV_CREATE_START | MV_CREATE_PULL_ALWAYS | MV_CREATE_PULL_NEVER)

#define MV_ERROR_PREFIX              "org.microvmd1.Error."
#define MV_BUS_ERROR_NOT_FOUND          MV_ERROR_PREFIX "NotFound"
#define MV_BUS_ERROR_INVALID_ARGUMENT   MV_ERROR_PREFIX "InvalidArgument"
#define MV_BUS_ERROR_INVALID_STATE      MV_ERROR_PREFIX "InvalidState"
#define MV_BUS_ERROR_ALREADY_EXISTS     MV_ERROR_PREFIX "AlreadyExists"
#define MV_BUS_ERROR_CONFLICT           MV_ERROR_PREFIX "Conflict"
#define MV_BUS_ERROR_RESOURCE_EXHAUSTED MV_ERROR_PREFIX "ResourceExhausted"
#define MV_BUS_ERROR_UNAVAILABLE        MV_ERROR_PREFIX "Unavailable"
#define MV_BUS_ERROR_UNSUPPORTED        MV_ERROR_PREFIX "Unsupported"
#define MV_BUS_ERROR_FAILED             MV_ERROR_PREFIX "Failed"

#define MV_ACTION_PREFIX                "org.microvmd1."
#define MV_ACTION_MACHINE_CREATE        MV_ACTION_PREFIX "machine.create"
#define MV_ACTION_MACHINE_LIFECYCLE     MV_ACTION_PREFIX "machine.lifecycle"
#define MV_ACTION_MACHINE_MODIFY        MV_ACTION_PREFIX "machine.modify"
#define MV_ACTION_MACHINE_DELETE        MV_ACTION_PREFIX "machine.delete"
#define MV_ACTION_MACHINE_FORCE         MV_ACTION_PREFIX "machine.force"
#define MV_ACTION_MACHINE_CONSOLE       MV_ACTION_PREFIX "machine.console"
#define MV_ACTION_MACHINE_READ_SECRETS  MV_ACTION_PREFIX "machine.read-secrets"
#define MV_ACTION_MACHINE_EXEC          MV_ACTION_PREFIX "machine.exec"
#define MV_ACTION_SNAPSHOT_CREATE       MV_ACTION_PREFIX "snapshot.create"
#define MV_ACTION_SNAPSHOT_RESTORE      MV_ACTION_PREFIX "snapshot.restore"
#define MV_ACTION_SNAPSHOT_DELETE       MV_ACTION_PREFIX "snapshot.delete"
#define MV_ACTION_IMAGE_PULL            MV_ACTION_PREFIX "image.pull"
#define MV_ACTION_IMAGE_DELETE          MV_ACTION_PREFIX "image.delete"
#define MV_ACTION_VOLUME_CREATE         MV_ACTION_PREFIX "volume.create"
#define MV_ACTION_VOLUME_DELETE         MV_ACTION_PREFIX "volume.delete"
#define MV_ACTION_NETWORK_CREATE        MV_ACTION_PREFIX "network.create"
#define MV_ACTION_NETWORK_DELETE        MV_ACTION_PREFIX "network.delete"

#define MV_DEFAULT_STATE_DIR     "/var/lib/microvmd"
#define MV_DEFAULT_RUNTIME_DIR   "/run/microvmd"
#define MV_DEFAULT_CONFIG_FILE   "/etc/microvmd/microvmd.conf"
/* The domain the networks' DNS answers machines' names under. */
#define MV_DEFAULT_DNS_DOMAIN    "microvm"
/* Where VMMs' user IDs are leased (hypervisor/sandbox.h): one directory
 * for the host, whatever runtime directory a daemon is given, since UIDs
 * are the host's. */
#define MV_UID_LEASE_DIR         MV_DEFAULT_RUNTIME_DIR "/vmm-uids"

/* Record layout under the state and runtime directories. */
#define MV_MACHINES_DIR          "machines"
#define MV_SNAPSHOTS_DIR         "snapshots"
#define MV_WARM_DIR              "warm"
#define MV_VOLUMES_DIR           "volumes"
#define MV_NETWORKS_DIR          "networks"
#define MV_CONFIG_RECORD         "config.json"
#define MV_STATUS_RECORD         "status.json"
#define MV_METRICS_DIR           "metrics"
/* In the runtime directory: the versions the hypervisors' binaries gave
 * (hypervisor/version-cache.h). */
#define MV_VERSIONS_FILE         "hypervisor-versions"
/* The event log (store/event-log.h), in the state directory. */
#define MV_EVENTS_LOG_NAME       "events.jsonl"
#define MV_EVENTS_ROTATED_NAME   "events.jsonl.1"
/* At most this many events in one Manager.GetEvents answer. */
#define MV_EVENTS_PER_CALL       1000
/* An empty file beside the records: the machine is to be destroyed. Made
 * when config.json cannot be rewritten (a full disk): it needs no space. */
#define MV_DESTROY_MARKER        "destroy-requested"
/* In a machine's runtime directory. */
#define MV_CONSOLE_LOG_NAME      "console.log"
/* Where the console's holder takes clients (hypervisor/console.h). */
#define MV_CONSOLE_SOCKET_NAME   "console.sock"
#define MV_VMM_LOG_NAME          "vmm.log"
/* The workload's stdout and stderr as the guest's agent sends them. */
#define MV_WORKLOAD_LOG_NAME     "workload.log"
/* A log's one rotated file: its name and this (see store/log-rotation.h). */
#define MV_LOG_ROTATED_SUFFIX    ".1"
#define MV_AGENT_SOCKET_NAME     "agent.sock"
/* In a machine's state directory: its frozen guest, and where it is
 * written before it is known to be whole. */
#define MV_SAVED_STATE_NAME      "saved"
#define MV_SAVED_PARTIAL_NAME    "saved.partial"

/* Structured log fields. */
#define MV_LOG_FIELD_MACHINE_ID  "MICROVMD_MACHINE_ID"
#define MV_LOG_FIELD_OPERATION   "MICROVMD_OPERATION_ID"
#define MV_LOG_FIELD_PHASE       "MICROVMD_PHASE"
/* An event's journal message: its kind's catalogue ID, its kind and its
 * sequence number. */
#define MV_LOG_FIELD_MESSAGE_ID  "MESSAGE_ID"
#define MV_LOG_FIELD_EVENT       "MICROVMD_EVENT"
#define MV_LOG_FIELD_EVENT_SEQUENCE "MICROVMD_EVENT_SEQUENCE"
