/* graphs.h -- CUDA graphs' allocation nodes, from their capture to each
 * launch.
 *
 * A stream-ordered allocation made while its stream is captured is an
 * allocation node of the graph being captured: recorded at once (kind
 * VT_KIND_GRAPH) and noted here with its stack, as is a free node of it.
 * The capture's nodes become the graph's at cuStreamEndCapture, and an
 * executable graph's at its instantiation. Each launch then does what the
 * graph does: a node its graph frees is allocated and freed again (a pair
 * of events), and a node whose memory outlives the graph is recorded
 * again when nothing holds its address (the memory of the launch before
 * was freed after it). Graphs built node by node, cloned or updated in
 * place are not followed. */
#ifndef VT_INTERPOSE_GRAPHS_H
#define VT_INTERPOSE_GRAPHS_H

#include <stdint.h>

/* A capture of `stream` began: what an earlier one left (a capture that
 * failed never ended) is forgotten. */
void vt_graph_capture_begins(void *stream);

/* An allocation node recorded at `address` while `stream` was captured. */
void vt_graph_node(void *stream, uint64_t address);

/* A free of `address` while `stream` was captured (a free node). */
void vt_graph_node_freed(void *stream, uint64_t address);

/* The capture of `stream` ended with graph `graph`. */
void vt_graph_captured(void *stream, void *graph);

/* Graph `graph` was instantiated as `exec`. */
void vt_graph_instantiated(void *graph, void *exec);

/* Executable graph `exec` was launched. */
void vt_graph_launched(void *exec);

/* A graph or an executable graph was destroyed. */
void vt_graph_dropped(void *graph_or_exec);

/* After fork, in the child: the tables' lock free again. */
void vt_graphs_reset_child(void);

#endif
