// dce: removes nodes that no graph output depends on. Graph inputs always stay, so the graph's
// signature does not change. Every op is pure, so nothing else needs to be kept.
#pragma once
#include "passes/pass.h"
