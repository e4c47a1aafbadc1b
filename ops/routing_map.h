// placeholder: the routing-map checks and positions shared by permute and unpermute
#pragma once
