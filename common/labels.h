/* labels.h -- grouping by label: the same text, the same group; and the
 * one order of the rows so grouped.
 *
 * Holders are grouped by call site in the library (stacks by their
 * vt_site_name) and in the CLI (holders of several dumps, the two sides of
 * a diff) by this one rule: two items are in one group exactly when their
 * labels are equal strings. Groups are numbered from 0 in the order their
 * first label was given. */
#ifndef VT_LABELS_H
#define VT_LABELS_H

#include <stddef.h>
#include <stdint.h>

struct vt_labels;

/* An empty grouping; NULL when out of memory. */
struct vt_labels *vt_labels_new(void);

/* The group of `label` (copied when new), and in *added whether it is new
 * (added may be NULL); UINT32_MAX when memory ran out. */
uint32_t vt_label_group(struct vt_labels *l, const char *label, int *added);

/* How many groups there are. */
size_t vt_labels_count(const struct vt_labels *l);

/* The label of group g (owned by l, valid until vt_labels_free). */
const char *vt_label_of(const struct vt_labels *l, uint32_t g);

void vt_labels_free(struct vt_labels *l);

/* The one order of the rows of a holders table, the library's and the
 * CLI's: more bytes first; on equal bytes, the labels in strcmp order;
 * then the lower id (a stack id). Negative when row a comes first, as
 * qsort's comparators. A label is read only on equal bytes, so a caller
 * may pass NULL for both where the bytes differ (NULL reads as ""). */
int vt_rank_order(uint64_t bytes_a, const char *label_a, uint64_t id_a, uint64_t bytes_b, const char *label_b,
                  uint64_t id_b);

#endif
