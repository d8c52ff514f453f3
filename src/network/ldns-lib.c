#include "ldns-lib.h"
#include "core/errors.h"
#include "util/library.h"

MvLdnsLib mv_ldns;

#define SYMBOL(field) { "ldns_" #field, (void **) &mv_ldns.field }
static const MvLibrarySymbol symbols[] = {
  SYMBOL (wire2pkt),
  SYMBOL (pkt2wire),
  SYMBOL (pkt_new),
  SYMBOL (pkt_free),
  SYMBOL (pkt_id),
  SYMBOL (pkt_rd),
  SYMBOL (pkt_qdcount),
  SYMBOL (pkt_question),
  SYMBOL (pkt_get_rcode),
  SYMBOL (pkt_push_rr),
  SYMBOL (pkt_set_id),
  SYMBOL (pkt_set_qr),
  SYMBOL (pkt_set_aa),
  SYMBOL (pkt_set_rd),
  SYMBOL (pkt_set_ra),
  SYMBOL (pkt_set_opcode),
  SYMBOL (pkt_set_rcode),
  SYMBOL (rr_new),
  SYMBOL (rr_clone),
  SYMBOL (rr_owner),
  SYMBOL (rr_get_type),
  SYMBOL (rr_get_class),
  SYMBOL (rr_set_owner),
  SYMBOL (rr_set_type),
  SYMBOL (rr_set_class),
  SYMBOL (rr_set_ttl),
  SYMBOL (rr_set_question),
  SYMBOL (rr_push_rdf),
  SYMBOL (rr_list_rr),
  SYMBOL (rr_list_rr_count),
  SYMBOL (rdf_new_frm_data),
  SYMBOL (rdf_clone),
  SYMBOL (rdf_data),
  SYMBOL (rdf_size),
  SYMBOL (dname_new_frm_str),
};
#undef SYMBOL

/* The soname the headers are of. */
static MvLibrary library = { "libldns.so.3", symbols, G_N_ELEMENTS (symbols) };

gboolean
mv_ldns_load (GError **error)
{
  const char *failure = mv_library_load (&library);

  if (failure)
    return mv_error_set (error, MV_ERROR_FAILED, "The DNS server cannot answer: %s", failure);
  return TRUE;
}
