/* The firecracker backend: Firecracker driven over its REST API on the
 * socket given by --api-sock. */
#pragma once
#include "hypervisor.h"

#define MV_FIRECRACKER_TYPE    "firecracker"
#define MV_FIRECRACKER_BINARY  "firecracker"
#define MV_FIRECRACKER_MAX_VCPUS 32

/* What snapshot_vm writes into its directory. */
#define MV_FIRECRACKER_SNAPSHOT_STATE   "vmstate"
#define MV_FIRECRACKER_SNAPSHOT_MEMORY  "memory"
#define MV_FIRECRACKER_SNAPSHOT_DEVICES "devices.json"

/* Asks @binary its version; MV_ERROR_UNAVAILABLE if it cannot be run. */
MvStarter *mv_firecracker_starter_new (const char *binary, GError **error);
