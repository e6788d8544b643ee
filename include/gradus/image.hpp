// gradus/image.hpp — umbrella for gd::image: PNG encode/decode and drawing (text labels).
// Not included by gradus/gradus.hpp: it needs libpng (link gradus::io).
#pragma once
#include "gradus/image/draw.hpp"
#include "gradus/image/png.hpp"
