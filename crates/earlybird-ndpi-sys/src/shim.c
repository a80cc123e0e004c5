/* The C side of earlybird's nDPI binding: the calls the Rust side makes,
 * with nDPI's structs kept on this side of the boundary. */
#include <stdint.h>
#include <string.h>
#include <ndpi_api.h>

/* What nDPI said about a flow so far. */
struct eb_ndpi_result {
  uint16_t master;
  uint16_t app;
  uint32_t category;
  uint32_t confidence;
};

/* A detection module with every protocol enabled (as ndpiReader sets it
 * up), or NULL. */
struct ndpi_detection_module_struct *eb_ndpi_open(void) {
  struct ndpi_detection_module_struct *m = ndpi_init_detection_module(ndpi_no_prefs);
  NDPI_PROTOCOL_BITMASK all;
  if (m == NULL)
    return NULL;
  NDPI_BITMASK_SET_ALL(all);
  ndpi_set_protocol_detection_bitmask2(m, &all);
  ndpi_finalize_initialization(m);
  return m;
}

void eb_ndpi_close(struct ndpi_detection_module_struct *m) {
  ndpi_exit_detection_module(m);
}

/* A zeroed per-flow state, or NULL. */
struct ndpi_flow_struct *eb_ndpi_flow_new(void) {
  return ndpi_calloc(1, ndpi_detection_get_sizeof_ndpi_flow_struct());
}

void eb_ndpi_flow_free(struct ndpi_flow_struct *f) {
  ndpi_free_flow(f);
}

static void fill(struct ndpi_flow_struct *f, ndpi_protocol p, struct eb_ndpi_result *out) {
  out->master = p.master_protocol;
  out->app = p.app_protocol;
  out->category = (uint32_t)p.category;
  out->confidence = (uint32_t)f->confidence;
}

/* Feeds one IP packet; returns whether nDPI could still read more of the
 * flow (extra dissection) once it has an application. */
int eb_ndpi_process(struct ndpi_detection_module_struct *m, struct ndpi_flow_struct *f,
                    const unsigned char *ip, unsigned short len, uint64_t ts_ms,
                    struct eb_ndpi_result *out) {
  ndpi_protocol p = ndpi_detection_process_packet(m, f, ip, len, ts_ms);
  fill(f, p, out);
  return ndpi_extra_dissection_possible(m, f) ? 1 : 0;
}

/* nDPI's final answer for a flow it did not finish (with its guess by
 * port and address, as ndpiReader asks). */
void eb_ndpi_giveup(struct ndpi_detection_module_struct *m, struct ndpi_flow_struct *f,
                    struct eb_ndpi_result *out) {
  uint8_t guessed = 0;
  ndpi_protocol p = ndpi_detection_giveup(m, f, 1, &guessed);
  fill(f, p, out);
}

/* "MASTER.APP" as ndpiReader prints it, into buf (NUL-terminated). */
void eb_ndpi_label(struct ndpi_detection_module_struct *m, uint16_t master, uint16_t app,
                   char *buf, unsigned len) {
  ndpi_protocol p;
  memset(&p, 0, sizeof(p));
  p.master_protocol = master;
  p.app_protocol = app;
  ndpi_protocol2name(m, p, buf, len);
}

const char *eb_ndpi_proto_name(struct ndpi_detection_module_struct *m, uint16_t id) {
  return ndpi_get_proto_name(m, id);
}

const char *eb_ndpi_category_name(struct ndpi_detection_module_struct *m, uint32_t cat) {
  return ndpi_category_get_name(m, (ndpi_protocol_category_t)cat);
}

const char *eb_ndpi_confidence_name(uint32_t c) {
  return ndpi_confidence_get_name((ndpi_confidence_t)c);
}
