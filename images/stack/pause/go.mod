module sprout/images/stack/pause

go 1.26.0
