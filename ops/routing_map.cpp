#include "ops/routing_map.h"
