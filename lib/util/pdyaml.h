/*
 * pdyaml.h — libyaml-0.so.2, loaded the first time profd calls it (pddl.h):
 * only configuration files and kubeconfigs are YAML.
 * Include this instead of <yaml.h>.
 */
#ifndef PD_PDYAML_H
#define PD_PDYAML_H

#include "pddl.h"

#include <yaml.h>

#define PD_YAML_FNS(X) \
	X(yaml_document_delete) \
	X(yaml_document_get_node) \
	X(yaml_document_get_root_node) \
	X(yaml_parser_delete) \
	X(yaml_parser_initialize) \
	X(yaml_parser_load) \
	X(yaml_parser_set_input_string)

PD_DL_DECLARE(yaml, PD_YAML_FNS)

#ifndef PD_YAML_NO_MACROS
#define yaml_document_delete (pd_yaml()->yaml_document_delete)
#define yaml_document_get_node (pd_yaml()->yaml_document_get_node)
#define yaml_document_get_root_node (pd_yaml()->yaml_document_get_root_node)
#define yaml_parser_delete (pd_yaml()->yaml_parser_delete)
#define yaml_parser_initialize (pd_yaml()->yaml_parser_initialize)
#define yaml_parser_load (pd_yaml()->yaml_parser_load)
#define yaml_parser_set_input_string (pd_yaml()->yaml_parser_set_input_string)
#endif

#endif
