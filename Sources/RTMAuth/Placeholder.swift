enum _PlaceholderRTMAuth {}
