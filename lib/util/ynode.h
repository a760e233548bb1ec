/*
 * ynode.h — small libyaml node tests shared by the YAML readers (the scrape
 * configuration, kubeconfig).
 */
#ifndef PD_UTIL_YNODE_H
#define PD_UTIL_YNODE_H

#include <stdbool.h>
#include <string.h>
#include "pdyaml.h"

/* Is n the scalar s? */
static inline bool pd_yis(const yaml_node_t *n, const char *s)
{
	size_t l = strlen(s);
	return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == l && !memcmp(n->data.scalar.value, s, l);
}

/* Absent, empty or ~/null (plain): "not set". */
static inline bool pd_ynull(const yaml_node_t *n)
{
	if (!n)
		return true;
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	return n->data.scalar.length == 0 || pd_yis(n, "~") || pd_yis(n, "null") || pd_yis(n, "Null") ||
	       pd_yis(n, "NULL");
}

/* "a mapping", "a list" or "a string", for messages. */
static inline const char *pd_ytype(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE: return "a mapping";
	case YAML_SEQUENCE_NODE: return "a list";
	default: return "a string";
	}
}

#endif
