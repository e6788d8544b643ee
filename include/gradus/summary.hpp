// gradus/summary.hpp — umbrella for gd::summary: TensorBoard event files (scalars, histograms,
// images, labelled images, text) written by a background FileWriter, and a reader for them.
// Not included by gradus/gradus.hpp: it needs libpng and threads (link gradus::io).
#pragma once
#include "gradus/image.hpp"
#include "gradus/summary/crc32c.hpp"
#include "gradus/summary/event.hpp"
#include "gradus/summary/histogram.hpp"
#include "gradus/summary/protobuf.hpp"
#include "gradus/summary/tfrecord.hpp"
#include "gradus/summary/writer.hpp"
