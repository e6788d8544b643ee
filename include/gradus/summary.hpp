// gradus/summary.hpp — umbrella for gd::summary: TensorBoard event files (scalars, histograms,
// images, labelled images, audio, text, the graph and its per-node run statistics) written by a
// background FileWriter, a reader for them, and the embedding projector export (projector.hpp).
// Not included by gradus/gradus.hpp: it needs libpng and threads (link gradus::io).
#pragma once
#include "gradus/image.hpp"
#include "gradus/summary/event.hpp"
#include "gradus/summary/graph.hpp"
#include "gradus/summary/histogram.hpp"
#include "gradus/summary/projector.hpp"
#include "gradus/summary/wav.hpp"
#include "gradus/summary/writer.hpp"
