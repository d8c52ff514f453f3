/* MvNft: the host's packet rules for microvmd's machines and networks,
 * kept in one nftables table of the daemon's own (family inet) through
 * libnftables.
 *
 * The table's chains (made by mv_nft_new(), IPv4 rules only):
 * - nat-prerouting, nat-output (type nat, priority dstnat): published
 *   ports, DNAT of host_address:host_port to the guest, for traffic that
 *   arrives from outside and traffic the host itself makes;
 * - forward (type filter, priority filter): established and related
 *   traffic passes first, then the chain "machines" (each machine's
 *   ingress rules, matched on its bridge and address, in order; the first
 *   match decides), then the chain "networks" (forwarding in and out of
 *   each network's bridge accepted);
 * - output (type filter, priority filter): what the host itself sends to
 *   a guest meets the same "machines" rules (established and related
 *   traffic first). Traffic between two guests on one bridge is bridged,
 *   not routed, and meets none of these;
 * - wake (type filter, hook postrouting), which forwarded and locally made
 *   packets both pass after DNAT: while a machine sleeps, each packet of a
 *   new connection to it is logged to the wake NFLOG group, with the
 *   machine's ID as the log prefix, and let through;
 * - nat-postrouting (type nat, priority srcnat): masquerading for
 *   networks with NAT.
 * Every base chain's policy is accept: the table adds, it never takes away
 * what another firewall on the host decides.
 *
 * Every rule of a machine carries the comment MV_NFT_MACHINE_TAG + its ID,
 * every rule of a network MV_NFT_NETWORK_TAG + its ID; nothing else is
 * remembered in the process, so a new MvNft (after a restart of the
 * daemon) finds, lists, replaces and removes them. Replacing or removing
 * the rules of one machine or network is one nftables transaction: when
 * nftables refuses any part, nothing changes.
 *
 * Errors are in MV_ERROR: bad input (an ID of other characters or too
 * long, a port 0, a bad interface name, prefix or port range) is
 * MV_ERROR_INVALID_ARGUMENT and reaches no command; what nftables refuses
 * is MV_ERROR_FAILED with nft's own message. Every function blocks for the
 * netlink round trips and may be called from any thread (one mutex). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define MV_NFT_TABLE        "microvmd"          /* one table of the daemon's, family inet */
#define MV_NFT_MACHINE_TAG  "mv:"
#define MV_NFT_NETWORK_TAG  "mvnet:"
/* Machine and network IDs: 1..MV_NFT_ID_MAX bytes of [A-Za-z0-9_-]. */
#define MV_NFT_ID_MAX       64

typedef enum { MV_NFT_ANY, MV_NFT_TCP, MV_NFT_UDP, MV_NFT_ICMP } MvNftProtocol;

typedef struct {
  guint32       host_address;   /* IPv4, host byte order; 0 = every local address of the host */
  guint16       host_port;
  guint16       guest_port;
  MvNftProtocol protocol;       /* TCP or UDP */
} MvNftPort;

typedef struct {
  gboolean      allow;          /* FALSE: drop */
  MvNftProtocol protocol;
  guint16       port_min, port_max;   /* 0, 0: any port (TCP/UDP only) */
  guint32       source;         /* host byte order */
  guint         source_prefix;  /* 0: anywhere */
} MvNftRule;

typedef struct {
  const char      *machine_id;  /* up to 64 bytes of [A-Za-z0-9_-] */
  guint32          address;     /* the guest's IPv4 address, host byte order */
  const char      *bridge;      /* its network's bridge */
  const MvNftPort *ports;  guint n_ports;
  const MvNftRule *rules;  guint n_rules;   /* ingress rules, in order; first match decides; no match: accept */
  gboolean         sleeping;    /* the machine is on standby: log new connections to it */
} MvNftMachine;

typedef struct _MvNft MvNft;

/* Makes the table and its base chains if they are missing; keeps the rules there
 * (a restarted daemon finds its rules). @wake_group: the NFLOG group of the wake log. */
MvNft     *mv_nft_new (guint wake_group, GError **error);
void       mv_nft_free (MvNft *nft);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MvNft, mv_nft_free)

/* Replaces everything of the machine's with what @machine says, in ONE nftables transaction
 * (a failure leaves the old rules in place). Blocks; safe from any thread (one mutex). */
gboolean   mv_nft_apply_machine (MvNft *nft, const MvNftMachine *machine, GError **error);
gboolean   mv_nft_remove_machine (MvNft *nft, const char *machine_id, GError **error);  /* none: TRUE */

/* A network: forwarding between its guests and the host accepted; with @nat, traffic from
 * @subnet/@prefix leaving through another interface than @bridge is masqueraded. */
gboolean   mv_nft_apply_network (MvNft *nft, const char *network_id, const char *bridge,
                                 guint32 subnet, guint prefix, gboolean nat, GError **error);
gboolean   mv_nft_remove_network (MvNft *nft, const char *network_id, GError **error);

/* The IDs (char*) of the machines / networks that have rules, for the daemon's Recover;
 * sorted, each once. */
GPtrArray *mv_nft_list_machines (MvNft *nft, GError **error);
GPtrArray *mv_nft_list_networks (MvNft *nft, GError **error);

/* Removes the whole table (tests, and a host that no longer wants it). Afterwards only
 * mv_nft_free() is of use: a new MvNft makes the table again. */
gboolean   mv_nft_remove_all (MvNft *nft, GError **error);

/* Checks a machine or network ID as the table's comments hold it. */
gboolean   mv_nft_check_id (const char *id, GError **error);

G_END_DECLS
