/* Networks: the host networks machines are attached to, each an IPv4
 * subnet behind a bridge of its own. Their spec (Manager.CreateNetwork),
 * their record (network.json) and the IPv4 arithmetic both need. Pure. */
#pragma once
#include <glib.h>

#define MV_NETWORKS_MAX             256
#define MV_NETWORK_RECORD_FORMAT    1
/* A network spec as CreateNetwork takes it, and network.json. */
#define MV_NETWORK_SPEC_MAX_BYTES   4096
#define MV_NETWORK_PREFIX_MIN       8
#define MV_NETWORK_PREFIX_MAX       30
#define MV_NETWORK_MTU_MIN          576
#define MV_NETWORK_MTU_MAX          9000
#define MV_NETWORK_MTU_DEFAULT      1500

typedef struct {
  char    *id;             /* NULL in a spec not yet created */
  char    *name;
  guint32  address;        /* the subnet's network address, host byte order */
  guint    prefix;         /* its prefix length */
  guint32  gateway;        /* the host's address on the bridge */
  gboolean nat;            /* the guests reach out through the host's address */
  guint    mtu;
  gint64   created_at;     /* µs since the epoch; 0 in a spec */
} MvNetworkSpec;

void           mv_network_spec_free (MvNetworkSpec *network);
MvNetworkSpec *mv_network_spec_copy (const MvNetworkSpec *network);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvNetworkSpec, mv_network_spec_free)

/* ---- IPv4 ---- */

/* A dotted quad, strictly: four decimal octets without leading zeros.
 * FALSE (no error set) for anything else. */
gboolean  mv_ipv4_parse (const char *text, guint32 *out);
char     *mv_ipv4_to_string (guint32 address);
guint32   mv_ipv4_mask (guint prefix);
/* "10.0.0.0/24" of @network. */
char     *mv_network_subnet_to_string (const MvNetworkSpec *network);
guint32   mv_network_broadcast (const MvNetworkSpec *network);
gboolean  mv_network_contains (const MvNetworkSpec *network, guint32 address);

/* ---- the spec and the record ---- */

/* The {name, subnet, gateway, nat, mtu} of a CreateNetwork, read strictly
 * (unknown fields refused), with the defaults filled in: the gateway is
 * the subnet's first host, NAT on, an MTU of 1500. MV_ERROR_INVALID_ARGUMENT
 * naming the field; an IPv6 subnet is MV_ERROR_UNSUPPORTED naming subnet. */
MvNetworkSpec *mv_network_spec_from_json (const char *json, GError **error);
/* The rules a spec and a record share. */
gboolean       mv_network_spec_validate (const MvNetworkSpec *network, GError **error);
/* Whether the subnets of @a and @b share an address. */
gboolean       mv_network_spec_overlaps (const MvNetworkSpec *a, const MvNetworkSpec *b);
/* MV_ERROR_INVALID_ARGUMENT naming subnet and the first of @others
 * (MvNetworkSpec*) whose subnet overlaps @network's. */
gboolean       mv_network_spec_check_overlap (const MvNetworkSpec *network, GPtrArray *others,
                                              GError **error);

/* network.json, format 1. */
char          *mv_network_spec_to_json (const MvNetworkSpec *network);
MvNetworkSpec *mv_network_spec_from_record (const char *data, gsize len, GError **error);
