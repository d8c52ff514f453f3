/* The cloud-hypervisor backend: Cloud Hypervisor driven over its REST API
 * (/api/v1/ on the socket given by --api-socket). */
#pragma once
#include "hypervisor.h"

#define MV_CLOUD_HYPERVISOR_TYPE    "cloud-hypervisor"
#define MV_CLOUD_HYPERVISOR_BINARY  "cloud-hypervisor"

/* The directory, beside the API socket, that a restore reads the
 * snapshot through (its config rewritten, the rest linked). */
#define MV_CLOUD_HYPERVISOR_RESTORE_DIR "restore"

/* Asks @binary its version; MV_ERROR_UNAVAILABLE if it cannot be run. */
MvStarter *mv_cloud_hypervisor_starter_new (const char *binary, GError **error);
