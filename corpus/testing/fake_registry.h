// Moved to testing/toy_op.h; kept until its includers name the new path.
#pragma once

#include "testing/toy_op.h"
