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
 * was freed after it). A free node of another graph's allocation (memory
 * a launch of that graph left in use) frees it when its own graph is
 * launched, not when the node is made. Graphs built node by node
 * (cuGraphAddMemAllocNode, cuGraphAddMemFreeNode, cuGraphAddNode) are
 * followed as captured ones are; a graph with memory nodes cannot be
 * cloned, nor its nodes deleted (cuda.h), and exec updates cannot change
 * memory nodes; a graph with memory nodes can be a child only when moved
 * into its parent, whose nodes it then adds to. */
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

/* Whether `address` is an allocation node of the capture of `stream` that
 * the capture has not freed. */
int vt_graph_capture_holds(void *stream, uint64_t address);

/* A free node of another graph's allocation (at `address`) while
 * `stream` was captured: freed when the graph is launched. */
void vt_graph_capture_frees(void *stream, uint64_t address);

/* An allocation node recorded at `address`, added to `graph` by hand. */
void vt_graph_node_added(void *graph, uint64_t address);

/* A free node of `address` added to `graph` by hand: of one of its own
 * allocation nodes (freed now, as a capture's free node is, and within
 * each launch), or of another graph's allocation (freed at each launch). */
void vt_graph_free_added(void *graph, uint64_t address);

/* Graph `child` was moved into graph `parent` (a child graph node that
 * owns it): its memory nodes are the parent's. */
void vt_graph_moved(void *child, void *parent);

/* The capture of `stream` ended with graph `graph`. */
void vt_graph_captured(void *stream, void *graph);

/* Graph `graph` was instantiated as `exec`. */
void vt_graph_instantiated(void *graph, void *exec);

/* Executable graph `exec` was launched. */
void vt_graph_launched(void *exec);

/* What a launch of `exec` that failed for want of memory asked for: the
 * bytes of its allocation nodes on the device where they are most (*device);
 * 0 when vramtrace knows none of its nodes. */
uint64_t vt_graph_launch_need(void *exec, int *device);

/* A graph or an executable graph was destroyed. */
void vt_graph_dropped(void *graph_or_exec);

/* After fork, in the child: the tables' lock free again. */
void vt_graphs_reset_child(void);

#endif
