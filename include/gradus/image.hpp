// gradus/image.hpp — umbrella for gd::image (tf.image): PNG and JPEG codecs, sample types,
// drawing (text labels).
// Not included by gradus/gradus.hpp: it needs libpng and libjpeg (link gradus::io).
#pragma once
#include "gradus/image/draw.hpp"
#include "gradus/image/dtype.hpp"
#include "gradus/image/jpeg.hpp"
#include "gradus/image/png.hpp"
