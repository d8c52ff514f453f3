/* ldns, opened when the DNS server answers its first query rather than
 * with the daemon: with OpenSSL behind it, it was a tenth of what a start
 * spends loading and relocating libraries. */
#pragma once
#include <glib.h>
#include <ldns/ldns.h>

/* Every function of ldns the DNS server calls, by its name there. */
typedef struct {
  typeof (ldns_wire2pkt)          *wire2pkt;
  typeof (ldns_pkt2wire)          *pkt2wire;
  typeof (ldns_pkt_new)           *pkt_new;
  typeof (ldns_pkt_free)          *pkt_free;
  typeof (ldns_pkt_id)            *pkt_id;
  typeof (ldns_pkt_rd)            *pkt_rd;
  typeof (ldns_pkt_qdcount)       *pkt_qdcount;
  typeof (ldns_pkt_question)      *pkt_question;
  typeof (ldns_pkt_get_rcode)     *pkt_get_rcode;
  typeof (ldns_pkt_push_rr)       *pkt_push_rr;
  typeof (ldns_pkt_set_id)        *pkt_set_id;
  typeof (ldns_pkt_set_qr)        *pkt_set_qr;
  typeof (ldns_pkt_set_aa)        *pkt_set_aa;
  typeof (ldns_pkt_set_rd)        *pkt_set_rd;
  typeof (ldns_pkt_set_ra)        *pkt_set_ra;
  typeof (ldns_pkt_set_opcode)    *pkt_set_opcode;
  typeof (ldns_pkt_set_rcode)     *pkt_set_rcode;
  typeof (ldns_rr_new)            *rr_new;
  typeof (ldns_rr_clone)          *rr_clone;
  typeof (ldns_rr_owner)          *rr_owner;
  typeof (ldns_rr_get_type)       *rr_get_type;
  typeof (ldns_rr_get_class)      *rr_get_class;
  typeof (ldns_rr_set_owner)      *rr_set_owner;
  typeof (ldns_rr_set_type)       *rr_set_type;
  typeof (ldns_rr_set_class)      *rr_set_class;
  typeof (ldns_rr_set_ttl)        *rr_set_ttl;
  typeof (ldns_rr_set_question)   *rr_set_question;
  typeof (ldns_rr_push_rdf)       *rr_push_rdf;
  typeof (ldns_rr_list_rr)        *rr_list_rr;
  typeof (ldns_rr_list_rr_count)  *rr_list_rr_count;
  typeof (ldns_rdf_new_frm_data)  *rdf_new_frm_data;
  typeof (ldns_rdf_clone)         *rdf_clone;
  typeof (ldns_rdf_data)          *rdf_data;
  typeof (ldns_rdf_size)          *rdf_size;
  typeof (ldns_dname_new_frm_str) *dname_new_frm_str;
} MvLdnsLib;

/* The table, filled by mv_ldns_load(): call it, and see it succeed,
 * before anything in it. */
extern MvLdnsLib mv_ldns;

/* Opens the library on the first call, from any thread; FALSE with
 * @error set if it cannot be, then and on every later call. */
gboolean mv_ldns_load (GError **error);
